package tracing_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/engine"
	"github.com/taskdeck/taskdeck/mcpclient/config"
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
	d := demo.New(demo.Options{PollInterval: time.Second, TTL: time.Hour})
	srv := httptest.NewServer(d.Handler())
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	b.Cleanup(func() {
		srv.Close()
		sink.Close()
		d.Close()
	})
	cfg, err := config.ParseConfig("bench.json", fmt.Appendf(nil, `{"mcpServers":{"demo":{"url":%q}}}`, srv.URL+"/mcp"))
	if err != nil {
		b.Fatal(err)
	}
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
	open := func(t *tracing.Tracer) *engine.Engine {
		e, err := engine.Open(engine.Options{DataDir: b.TempDir(), Config: cfg, Tracer: t})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { e.Close() })
		return e
	}
	off, on := open(nil), open(tr)
	ids := map[*engine.Engine][]string{}
	for _, e := range []*engine.Engine{off, on} {
		for i := range 50 {
			// approve waits for input: its polls change nothing.
			res, err := e.Call(ctx, deck.CallRequest{Server: model.ServerRef{Name: "demo"}, Tool: "approve", Args: fmt.Appendf(nil, `{"action":"a%d"}`, i)})
			if err != nil {
				b.Fatal(err)
			}
			ids[e] = append(ids[e], res.Task.ID)
		}
	}
	run := func(e *engine.Engine, n int) time.Duration {
		start := time.Now()
		for i := range n {
			if err := e.PollNow(ctx, ids[e][i%len(ids[e]):][:1]); err != nil {
				b.Fatal(err)
			}
		}
		return time.Since(start)
	}
	run(off, len(ids[off])) // warm: sessions, every task's first poll
	run(on, len(ids[on]))
	const perRound = 20
	b.ResetTimer()
	var ratios []float64
	var tOff, tOn time.Duration
	for r := 0; r < max(b.N, 5); r++ {
		var a, c time.Duration
		if r%2 == 0 {
			a = run(off, perRound)
			c = run(on, perRound)
		} else {
			c = run(on, perRound)
			a = run(off, perRound)
		}
		tOff, tOn = tOff+a, tOn+c
		ratios = append(ratios, float64(c)/float64(a))
	}
	b.StopTimer()
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
	slices.Sort(ratios)
	polls := float64(len(ratios) * perRound)
	offNs := float64(tOff.Nanoseconds()) / polls
	b.ReportMetric(float64(tOff.Microseconds())/polls, "µs/poll-off")
	b.ReportMetric(float64(tOn.Microseconds())/polls, "µs/poll-on")
	b.ReportMetric(ratios[len(ratios)/2], "x-on")
	b.ReportMetric(ratios[0], "x-on-min")
	b.ReportMetric(ratios[len(ratios)-1], "x-on-max")
	b.ReportMetric((offNs+nsOff)/offNs, "x-off")
	b.ReportMetric(nsSpan, "ns-span")
	b.ReportMetric((offNs+nsSpan)/offNs, "x-span")
	b.ReportMetric(0, "ns/op")
}
