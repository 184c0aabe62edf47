package telemetry_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/engine"
	"github.com/taskdeck/taskdeck/mcpclient/config"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/telemetry"
)

// BenchmarkPollMetrics times Deck.PollNow of one open task on a demo
// server on loopback (store read, tasks/get, nothing to write) with the
// metrics off and on, in the same run: two engines, each on its own store,
// neither watching (so only the benchmark polls), in alternating short
// rounds, so that the machine's drift hits both. x-off is the median of
// the rounds' ratios on/off; the target is ≤ 1.02. On a shared machine a
// round's noise is larger than the metrics' cost, so the cost of the
// observation itself (ns-observe: what Polled adds to a poll) is timed in
// the same run too, and x-observe is the poll with it over the poll
// without.
func BenchmarkPollMetrics(b *testing.B) {
	d := demo.New(demo.Options{PollInterval: time.Second, TTL: time.Hour})
	srv := httptest.NewServer(d.Handler())
	b.Cleanup(func() {
		srv.Close()
		d.Close()
	})
	cfg, err := config.ParseConfig("bench.json", fmt.Appendf(nil, `{"mcpServers":{"demo":{"url":%q}}}`, srv.URL+"/mcp"))
	if err != nil {
		b.Fatal(err)
	}
	open := func(obs engine.Observer) *engine.Engine {
		e, err := engine.Open(engine.Options{DataDir: b.TempDir(), Config: cfg, Observer: obs})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { e.Close() })
		return e
	}
	off := open(nil)
	on := open(telemetry.New(cfg.Names()))
	ctx := context.Background()
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
	m := telemetry.New(cfg.Names())
	const observations = 1_000_000
	start := time.Now()
	for i := range observations {
		m.Polled("demo", time.Duration(i), "")
	}
	observe := float64(time.Since(start).Nanoseconds()) / observations
	slices.Sort(ratios)
	polls := float64(len(ratios) * perRound)
	b.ReportMetric(float64(tOff.Microseconds())/polls, "µs/poll-off")
	b.ReportMetric(float64(tOn.Microseconds())/polls, "µs/poll-on")
	b.ReportMetric(ratios[len(ratios)/2], "x-off")
	b.ReportMetric(observe, "ns-observe")
	offNs := float64(tOff.Nanoseconds()) / polls
	b.ReportMetric((offNs+observe)/offNs, "x-observe")
	b.ReportMetric(0, "ns/op")
}
