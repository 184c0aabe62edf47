// Package tracing sends the life of each task as OpenTelemetry traces
// (OTLP over HTTP or gRPC, through the OpenTelemetry Go SDK), configured
// from the standard OTEL_* environment only. It is off unless an OTLP
// endpoint is configured: then there is no *Tracer at all (nil), and the
// engine pays a nil check per poll.
//
// A task is one long span from its intent to its end. Its trace and span
// ids are derived from the record's id (TaskSpan), so that any process
// that sees the task end (after a restart, on another host of a fleet)
// emits it, with the intent's time as its start. Every poll, push, answer,
// cancel and call is a short span linked to it (a link, never a child: it
// may come hours later from another process). A short span with no parent
// of its own is put in the task's trace, so that a backend shows the task
// and everything done about it as one trace; one with a parent (an
// agent's traceparent) stays in the agent's trace.
package tracing

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/taskdeck/taskdeck/model"
)

// DefaultQueue bounds the spans ended and not yet exported: past it a span
// is dropped and counted (OTEL_BSP_MAX_QUEUE_SIZE sets it, as the SDK's).
const DefaultQueue = 2048

// Tracer makes the spans of one process. A nil *Tracer is tracing off:
// every method is a no-op.
type Tracer struct {
	tp     *sdktrace.TracerProvider
	tracer trace.Tracer
	log    *slog.Logger
	queue  int64
	// inflight: ended, not yet through the exporter; dropped: spans that
	// never reached the backend (queue full, or their export failed).
	inflight, dropped atomic.Int64
	warned            atomic.Bool
}

// Enabled tells whether the environment asks for traces: an OTLP
// endpoint is set, or OTEL_TRACES_EXPORTER=otlp; never with
// OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none.
func Enabled() bool {
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") {
		return false
	}
	switch exp := strings.TrimSpace(os.Getenv("OTEL_TRACES_EXPORTER")); exp {
	case "none":
		return false
	case "":
		return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
	}
	return true // otlp, or a value FromEnv refuses by name
}

// FromEnv makes the tracer the OTEL_* environment asks for, or nil when it
// asks for none (see Enabled). The exporters read the endpoint, headers,
// timeout and TLS settings themselves; the protocol is
// OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL, http/protobuf (the default) or
// grpc. Nothing is sent until a span ends: a collector that is down costs
// only dropped spans. log hears the exporter's failures.
func FromEnv(ctx context.Context, log *slog.Logger) (*Tracer, error) {
	if !Enabled() {
		return nil, nil
	}
	if exp := strings.TrimSpace(os.Getenv("OTEL_TRACES_EXPORTER")); exp != "" && exp != "otlp" {
		return nil, fmt.Errorf("OTEL_TRACES_EXPORTER=%q: taskdeck sends traces over OTLP only (otlp, or none)", exp)
	}
	proto := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if proto == "" {
		proto = os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	var exp sdktrace.SpanExporter
	var err error
	switch proto {
	case "", "http/protobuf":
		exp, err = otlptracehttp.New(ctx)
	case "grpc":
		exp, err = otlptracegrpc.New(ctx)
	default:
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL=%q: taskdeck sends traces as http/protobuf or grpc", proto)
	}
	if err != nil {
		return nil, fmt.Errorf("OpenTelemetry exporter: %w", err)
	}
	queue := DefaultQueue
	if v := os.Getenv("OTEL_BSP_MAX_QUEUE_SIZE"); v != "" {
		if queue, err = strconv.Atoi(v); err != nil || queue < 1 {
			return nil, fmt.Errorf("OTEL_BSP_MAX_QUEUE_SIZE=%q is not a positive number of spans", v)
		}
	}
	return New(ctx, exp, queue, log)
}

// New makes a tracer that sends its spans to exp in batches, at most queue
// of them waiting (past that, spans are dropped and counted). The
// resource is service.name taskdeck, unless OTEL_SERVICE_NAME or
// OTEL_RESOURCE_ATTRIBUTES say otherwise.
func New(ctx context.Context, exp sdktrace.SpanExporter, queue int, log *slog.Logger) (*Tracer, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "taskdeck")),
		resource.WithFromEnv(), // after: OTEL_SERVICE_NAME wins
		resource.WithTelemetrySDK(),
		resource.WithHost(),
		resource.WithProcessPID()) // which process of a fleet, or of a restart
	if err != nil {
		return nil, fmt.Errorf("OpenTelemetry resource: %w", err)
	}
	t := &Tracer{log: log, queue: int64(queue)}
	// The SDK's own queue holds as many as this one admits, so that it
	// never drops one uncounted; it never blocks the span's End.
	bsp := sdktrace.NewBatchSpanProcessor(counting{exp, t}, sdktrace.WithMaxQueueSize(queue))
	t.tp = sdktrace.NewTracerProvider(
		sdktrace.WithResource(res),
		sdktrace.WithIDGenerator(ids{}),
		sdktrace.WithSpanProcessor(bounded{bsp, t}))
	t.tracer = t.tp.Tracer("github.com/taskdeck/taskdeck")
	// The SDK's errors (an export that failed) go to the log, never to the
	// terminal the dashboard owns.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(t.exportFailed))
	return t, nil
}

// Shutdown sends what is queued, within ctx, and stops the tracer.
func (t *Tracer) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.tp.Shutdown(ctx)
}

// ForceFlush sends every span ended so far, within ctx.
func (t *Tracer) ForceFlush(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.tp.ForceFlush(ctx)
}

// Dropped counts the spans that never reached the backend: the queue was
// full (the exporter down or slow), or their export failed.
func (t *Tracer) Dropped() int64 {
	if t == nil {
		return 0
	}
	return t.dropped.Load()
}

func (t *Tracer) exportFailed(err error) {
	if t.warned.CompareAndSwap(false, true) {
		t.log.Warn("traces: the OpenTelemetry exporter failed; spans are dropped and counted meanwhile", "err", err)
		return
	}
	t.log.Debug("traces: export failed", "err", err, "dropped", t.dropped.Load())
}

// bounded admits a span to the batch processor while fewer than the
// queue's bound wait; past it the span is dropped and counted: a slow
// exporter never holds the poll that ended the span.
type bounded struct {
	sdktrace.SpanProcessor
	t *Tracer
}

func (b bounded) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		return
	}
	if b.t.inflight.Add(1) > b.t.queue {
		b.t.inflight.Add(-1)
		b.t.dropped.Add(1)
		return
	}
	b.SpanProcessor.OnEnd(s)
}

// counting lets spans out of the bound as their export returns, and counts
// those whose export failed as dropped (the exporter retried them first).
type counting struct {
	sdktrace.SpanExporter
	t *Tracer
}

func (c counting) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := c.SpanExporter.ExportSpans(ctx, spans)
	c.t.inflight.Add(-int64(len(spans)))
	if err != nil {
		c.t.dropped.Add(int64(len(spans)))
	}
	return err
}

// TaskSpan is the span context of the task's long span: its ids are
// derived from the record's id, the same in every process.
func TaskSpan(recID string) trace.SpanContext {
	sum := sha256.Sum256([]byte("taskdeck task span\x00" + recID))
	var tid trace.TraceID
	var sid trace.SpanID
	copy(tid[:], sum[:16])
	copy(sid[:], sum[16:24])
	if !tid.IsValid() || !sid.IsValid() { // 2^-64: any fixed valid id will do
		tid[15], sid[7] = 1, 1
	}
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true})
}

// ids is the SDK's random generator, but a root span started under
// wantIDs gets them: the task's span its derived ids, a short span with no
// parent the task's trace.
type ids struct{}

type wantKey struct{}

type wantIDs struct {
	trace trace.TraceID
	span  trace.SpanID // zero: a random one
}

func (ids) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	w, _ := ctx.Value(wantKey{}).(wantIDs)
	if w.span.IsValid() {
		return w.trace, w.span
	}
	tid := w.trace
	for !tid.IsValid() {
		binary.NativeEndian.PutUint64(tid[:8], rand.Uint64())
		binary.NativeEndian.PutUint64(tid[8:], rand.Uint64())
	}
	return tid, ids{}.NewSpanID(ctx, tid)
}

func (ids) NewSpanID(context.Context, trace.TraceID) trace.SpanID {
	var sid trace.SpanID
	for !sid.IsValid() {
		binary.NativeEndian.PutUint64(sid[:], rand.Uint64())
	}
	return sid
}

// Attribute keys: the field names of the metrics and the JSON log.
const (
	keyRecord = attribute.Key("record")
	keyServer = attribute.Key("server")
	keyTool   = attribute.Key("tool")
	keyStatus = attribute.Key("status")
	keyMethod = attribute.Key("mcp.method.name")
)

// Span names of the short spans.
const (
	OpCall   = "tools/call"
	OpPoll   = "tasks/get"
	OpAnswer = "tasks/update"
	OpCancel = "tasks/cancel"
	OpPush   = "push"
)

// Op is one short span about a task; a nil *Op (tracing off) does nothing.
type Op struct{ span trace.Span }

// Start begins the short span op about the task rec (on server, as the
// metrics name it), linked to the task's span. Under a span of ctx (an
// agent's traceparent) it is that span's child; else it is a root in the
// task's trace. The returned context carries it, for the request's
// traceparent.
func (t *Tracer) Start(ctx context.Context, op string, rec *model.Task, server string) (context.Context, *Op) {
	if t == nil {
		return ctx, nil
	}
	task := TaskSpan(rec.ID)
	if !trace.SpanContextFromContext(ctx).IsValid() {
		ctx = context.WithValue(ctx, wantKey{}, wantIDs{trace: task.TraceID()})
	}
	kind := trace.SpanKindClient
	if op == OpPush {
		kind = trace.SpanKindConsumer
	}
	ctx, span := t.tracer.Start(ctx, op, trace.WithSpanKind(kind), trace.WithLinks(trace.Link{SpanContext: task}),
		trace.WithAttributes(keyRecord.String(rec.ID), keyServer.String(server), keyTool.String(rec.Tool)))
	if op != OpPush {
		span.SetAttributes(keyMethod.String(op))
	}
	return ctx, &Op{span}
}

// End ends the span with the task's status after it (nil: unchanged) and
// the step's error.
func (o *Op) End(rec *model.Task, err error) {
	if o == nil {
		return
	}
	if rec != nil {
		o.span.SetAttributes(keyStatus.String(string(rec.Status)))
	}
	if err != nil {
		o.span.SetStatus(codes.Error, err.Error())
	}
	o.span.End()
}

// TaskEnded emits the task's long span, from its intent (rec.CreatedAt)
// to at, in the process that saw it end.
func (t *Tracer) TaskEnded(rec *model.Task, server string, at time.Time) {
	if t == nil {
		return
	}
	sc := TaskSpan(rec.ID)
	ctx := context.WithValue(context.Background(), wantKey{}, wantIDs{trace: sc.TraceID(), span: sc.SpanID()})
	_, span := t.tracer.Start(ctx, "task", trace.WithNewRoot(), trace.WithTimestamp(rec.CreatedAt),
		trace.WithAttributes(keyRecord.String(rec.ID), keyServer.String(server), keyTool.String(rec.Tool),
			keyStatus.String(string(rec.Status)), attribute.String("task_id", rec.TaskID)))
	// A cancel is someone's choice, not a failure.
	if rec.Status == model.StatusFailed || rec.Status == model.StatusUnknown || rec.IsError {
		span.SetStatus(codes.Error, cmpNonEmpty(rec.StatusMessage, string(rec.Status)))
	}
	span.End(trace.WithTimestamp(at))
}

func cmpNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// LogAttr is the "trace" field of a log line about the record recID: the
// id of its task's trace, so that the JSON log joins the spans; none (an
// empty attribute, which slog leaves out) when tracing is off.
func (t *Tracer) LogAttr(recID string) slog.Attr {
	if t == nil {
		return slog.Attr{}
	}
	return slog.String("trace", TaskSpan(recID).TraceID().String())
}

// propagator reads and writes W3C traceparent and tracestate.
var propagator = propagation.TraceContext{}

// Extract returns ctx under the remote span a request's traceparent (in
// _meta, or an HTTP header) names. One that does not parse is ignored:
// the request starts a trace of its own.
func Extract(ctx context.Context, get func(key string) string) context.Context {
	return propagator.Extract(ctx, getter(get))
}

// Inject writes the traceparent (and tracestate) of ctx's span with set;
// nothing when ctx has none.
func Inject(ctx context.Context, set func(key, value string)) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	propagator.Inject(ctx, setter(set))
}

type getter func(string) string

func (g getter) Get(key string) string { return g(key) }
func (getter) Keys() []string          { return nil }
func (getter) Set(string, string)      {}

type setter func(string, string)

func (setter) Get(string) string       { return "" }
func (setter) Keys() []string          { return nil }
func (s setter) Set(key, value string) { s(key, value) }
