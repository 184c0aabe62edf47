package tracing_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"

	"github.com/taskdeck/taskdeck/engine"
	"github.com/taskdeck/taskdeck/internal/pollbench"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/tracing"
)

// BenchmarkPollTracing times Deck.PollNow of one open task on a demo
// server on loopback (store read, tasks/get, nothing to write) with
// tracing off and on, in the same run, as telemetry's BenchmarkPollMetrics
// does for metrics: two engines, each on its own store, neither watching,
// in alternating short rounds. On, every poll is a span exported over
// OTLP/HTTP (batched) to a loopback endpoint that reads and discards it,
// and carries its traceparent in _meta. x-on is the median of the rounds'
// ratios on/off (target ≤ 1.10, with their range); x-off is what tracing
// off adds to a poll (a nil check, timed in the same run) over the poll
// (target 1.00); ns-span is what one span costs the poll that ends it.
func BenchmarkPollTracing(b *testing.B) {
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	b.Cleanup(sink.Close)
	ctx := context.Background()
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(sink.URL+"/v1/traces"))
	if err != nil {
		b.Fatal(err)
	}
	tr, err := tracing.New(ctx, exp, tracing.DefaultQueue, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = tr.Shutdown(context.Background()) })
	r := pollbench.Rounds(b, func(o *engine.Options) { o.Tracer = tr })
	rec := &model.Task{ID: "bench", Tool: "approve"}
	const n = 200_000
	var none *tracing.Tracer // tracing off
	start := time.Now()
	for range n {
		_, op := none.Start(ctx, tracing.OpPoll, rec, "demo")
		op.End(rec, nil)
	}
	nsOff := float64(time.Since(start).Nanoseconds()) / n
	const spans = tracing.DefaultQueue / 2 // within the queue: none dropped, each timed whole
	start = time.Now()
	for range spans {
		_, op := tr.Start(ctx, tracing.OpPoll, rec, "demo")
		op.End(rec, nil)
	}
	nsSpan := float64(time.Since(start).Nanoseconds()) / spans
	offNs := r.OffNs()
	r.Report(b, "x-on")
	b.ReportMetric(r.Ratios[0], "x-on-min")
	b.ReportMetric(r.Ratios[len(r.Ratios)-1], "x-on-max")
	b.ReportMetric((offNs+nsOff)/offNs, "x-off")
	b.ReportMetric(nsSpan, "ns-span")
	b.ReportMetric((offNs+nsSpan)/offNs, "x-span")
	b.ReportMetric(0, "ns/op")
}
