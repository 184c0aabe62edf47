package tracing_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/engine"
	"github.com/taskdeck/taskdeck/internal/waitfor"
	"github.com/taskdeck/taskdeck/mcpclient/config"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/tracing"
)

// metaSeen records, per JSON-RPC method, the traceparent each request to
// the demo server carried in its _meta ("" for none).
type metaSeen struct {
	mu   sync.Mutex
	seen map[string][]string
}

func (m *metaSeen) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var req struct {
			Method string `json:"method"`
			Params struct {
				Meta map[string]any `json:"_meta"`
			} `json:"params"`
		}
		if json.Unmarshal(body, &req) == nil && req.Method != "" {
			tp, _ := req.Params.Meta["traceparent"].(string)
			m.mu.Lock()
			m.seen[req.Method] = append(m.seen[req.Method], tp)
			m.mu.Unlock()
		}
		h.ServeHTTP(w, r)
	})
}

func (m *metaSeen) of(method string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.seen[method])
}

// open starts a demo server on loopback behind seen, and an engine on it
// that traces to exp.
func open(t *testing.T, exp sdktrace.SpanExporter, queue int, seen *metaSeen) (*engine.Engine, *tracing.Tracer) {
	t.Helper()
	d := demo.New(demo.Options{PollInterval: 50 * time.Millisecond, TTL: time.Hour, Speed: 0.05, NoPush: true})
	var h http.Handler = d.Handler()
	if seen != nil {
		h = seen.wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		srv.Close()
		d.Close()
	})
	cfg, err := config.ParseConfig("test.json", fmt.Appendf(nil, `{"mcpServers":{"demo":{"url":%q}}}`, srv.URL+"/mcp"))
	if err != nil {
		t.Fatal(err)
	}
	tr, err := tracing.New(context.Background(), exp, queue, nil)
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.Open(engine.Options{DataDir: t.TempDir(), Config: cfg, Tracer: tr})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		e.Close()
		ctx, cancel := context.WithTimeout(context.Background(), waitfor.Scale(5*time.Second))
		defer cancel()
		_ = tr.Shutdown(ctx)
	})
	return e, tr
}

// traceparent is the W3C header of sc.
func traceparent(sc trace.SpanContext) string {
	return fmt.Sprintf("00-%s-%s-%s", sc.TraceID(), sc.SpanID(), sc.TraceFlags())
}

// TestTraceContextInMeta: tools/call and every tasks/* carry the
// traceparent of their own span in _meta (SEP-414); each such span is a
// root in the task's trace linked to the task's span; the task's span
// comes when it ends, from its intent on, with its derived ids. Under an
// agent's span, the call is that span's child and stays in its trace.
func TestTraceContextInMeta(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	seen := &metaSeen{seen: map[string][]string{}}
	e, tr := open(t, exp, tracing.DefaultQueue, seen)
	ctx := context.Background()

	res, err := e.Call(ctx, deck.CallRequest{Server: model.ServerRef{Name: "demo"}, Tool: "approve", Args: json.RawMessage(`{"action":"deploy"}`)})
	if err != nil {
		t.Fatal(err)
	}
	id, created := res.Task.ID, res.Task.CreatedAt
	waitfor.Within(t, 10*time.Second, "the task to wait for input", func() bool {
		_ = e.PollNow(ctx, []string{id})
		rec, err := e.Get(ctx, id)
		return err == nil && rec.Task.Status == model.StatusInputRequired
	})
	if _, err := e.Answer(ctx, id, map[string]json.RawMessage{"approve-1": json.RawMessage(`{"action":"accept","content":{"approve":true,"reason":"ok"}}`)}); err != nil {
		t.Fatal(err)
	}
	waitfor.Within(t, 10*time.Second, "the task to complete", func() bool {
		_ = e.PollNow(ctx, []string{id})
		rec, err := e.Get(ctx, id)
		return err == nil && rec.Task.Status == model.StatusCompleted
	})

	// An agent's call: its span is the parent.
	agent := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{4, 5, 6}, TraceFlags: trace.FlagsSampled, Remote: true})
	res, err = e.Call(trace.ContextWithRemoteSpanContext(ctx, agent), deck.CallRequest{Server: model.ServerRef{Name: "demo"}, Tool: "sleep", Args: json.RawMessage(`{"seconds":600}`)})
	if err != nil {
		t.Fatal(err)
	}
	slept := res.Task.ID
	if _, err := e.Cancel(ctx, slept); err != nil {
		t.Fatal(err)
	}
	if err := tr.ForceFlush(ctx); err != nil { // everything ended is exported
		t.Fatal(err)
	}

	task := tracing.TaskSpan(id)
	byName := map[string][]tracetest.SpanStub{}
	var taskSpan *tracetest.SpanStub
	for _, s := range exp.GetSpans() {
		if s.SpanContext.SpanID() == task.SpanID() {
			taskSpan = &s
			continue
		}
		byName[s.Name] = append(byName[s.Name], s)
	}
	if taskSpan == nil || taskSpan.SpanContext.TraceID() != task.TraceID() || taskSpan.Parent.IsValid() {
		t.Fatalf("no root task span with the derived ids %s/%s among %d spans", task.TraceID(), task.SpanID(), len(exp.GetSpans()))
	}
	if !taskSpan.StartTime.Equal(created) || !taskSpan.EndTime.After(created) {
		t.Fatalf("task span from %s to %s; want from the intent, %s", taskSpan.StartTime, taskSpan.EndTime, created)
	}
	for method, name := range map[string]string{"tools/call": tracing.OpCall, "tasks/get": tracing.OpPoll, "tasks/update": tracing.OpAnswer, "tasks/cancel": tracing.OpCancel} {
		sent := seen.of(method)
		if len(sent) == 0 {
			t.Fatalf("no %s reached the server", method)
		}
		spans := byName[name]
		for _, tp := range sent {
			i := slices.IndexFunc(spans, func(s tracetest.SpanStub) bool { return traceparent(s.SpanContext) == tp })
			if i < 0 {
				t.Fatalf("%s carried traceparent %q, which is none of its %d %s spans", method, tp, len(spans), name)
			}
			s := spans[i]
			record := ""
			for _, a := range s.Attributes {
				if a.Key == "record" {
					record = a.Value.AsString()
				}
			}
			want := tracing.TaskSpan(record)
			if len(s.Links) != 1 || s.Links[0].SpanContext.SpanID() != want.SpanID() || s.Links[0].SpanContext.TraceID() != want.TraceID() {
				t.Fatalf("%s span of %s is not linked to its task's span: %+v", name, record, s.Links)
			}
			switch {
			case name == tracing.OpCall && record == slept:
				if s.Parent.SpanID() != agent.SpanID() || s.SpanContext.TraceID() != agent.TraceID() {
					t.Fatalf("the agent's call is not the child of the agent's span: parent %s in trace %s", s.Parent.SpanID(), s.SpanContext.TraceID())
				}
			case s.Parent.IsValid() || s.SpanContext.TraceID() != want.TraceID():
				t.Fatalf("%s span of %s: parent %v, trace %s; want a root in the task's trace %s", name, record, s.Parent.SpanID(), s.SpanContext.TraceID(), want.TraceID())
			}
		}
	}
}

// TestSpansDroppedWhenExporterHangs: with an OTLP endpoint that accepts
// connections and never answers, polls go on as before (none waits for
// the exporter) and the spans past the queue's bound are dropped and
// counted.
func TestSpansDroppedWhenExporterHangs(t *testing.T) {
	release := make(chan struct{})
	hung := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() {
		close(release)
		hung.Close()
	})
	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(hung.URL+"/v1/traces"), otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false}))
	if err != nil {
		t.Fatal(err)
	}
	const queue = 4
	e, tr := open(t, exp, queue, nil)
	ctx := context.Background()
	res, err := e.Call(ctx, deck.CallRequest{Server: model.ServerRef{Name: "demo"}, Tool: "sleep", Args: json.RawMessage(`{"seconds":600}`)})
	if err != nil {
		t.Fatal(err)
	}
	const polls = 50
	for range polls {
		if err := e.PollNow(ctx, []string{res.Task.ID}); err != nil {
			t.Fatal(err)
		}
	}
	// The call and these polls ended a span each; at most queue of them
	// wait for the exporter, which never returns.
	if got, least := tr.Dropped(), int64(polls-queue); got < least {
		t.Fatalf("%d spans dropped; want at least %d (%d polls, a queue of %d, the exporter hung)", got, least, polls, queue)
	}
}

// TestTraceparentExtract: a traceparent that parses continues its trace;
// one that does not is ignored (the request starts a trace of its own).
func TestTraceparentExtract(t *testing.T) {
	for _, tc := range []struct {
		tp    string
		valid bool
	}{
		{"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", true},
		{"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331", false},
		{"00-00000000000000000000000000000000-b7ad6b7169203331-01", false},
		{"zz-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", false},
		{"not a traceparent", false},
	} {
		ctx := tracing.Extract(context.Background(), func(k string) string {
			if k == "traceparent" {
				return tc.tp
			}
			return ""
		})
		sc := trace.SpanContextFromContext(ctx)
		if sc.IsValid() != tc.valid || (tc.valid && traceparent(sc) != tc.tp) {
			t.Errorf("traceparent %q: span context %v (valid %v), want valid %v", tc.tp, sc, sc.IsValid(), tc.valid)
		}
	}
}
