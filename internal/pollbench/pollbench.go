// Package pollbench times the engine's polls with an option off and on,
// in the same run, for the benchmarks that price what an option adds to a
// poll (metrics, traces).
package pollbench

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
)

// PerRound is how many polls each engine makes in a round.
const PerRound = 20

// Result is what the rounds measured: each round's ratio on/off, sorted,
// and the total time of each side's polls.
type Result struct {
	Ratios  []float64
	Off, On time.Duration
}

// Polls is how many polls each side made.
func (r Result) Polls() float64 { return float64(len(r.Ratios) * PerRound) }

// OffNs is one poll's time with the option off, in ns.
func (r Result) OffNs() float64 { return float64(r.Off.Nanoseconds()) / r.Polls() }

// Median is the median of the rounds' ratios.
func (r Result) Median() float64 { return r.Ratios[len(r.Ratios)/2] }

// Report adds the poll times and the median ratio (named median) to b.
func (r Result) Report(b *testing.B, median string) {
	b.ReportMetric(float64(r.Off.Microseconds())/r.Polls(), "µs/poll-off")
	b.ReportMetric(float64(r.On.Microseconds())/r.Polls(), "µs/poll-on")
	b.ReportMetric(r.Median(), median)
}

// Rounds times Deck.PollNow of one open task on a demo server on
// loopback (store read, tasks/get, nothing to write): two engines on
// stores of their own, neither watching (so only the benchmark polls),
// the second with on applied to its options, in alternating rounds of
// PerRound polls (at least 5, b.N), so that the machine's drift hits
// both. Each polls 50 tasks of approve, which waits for input: its polls
// change nothing.
func Rounds(b *testing.B, on func(*engine.Options)) Result {
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
	open := func(tune func(*engine.Options)) *engine.Engine {
		opts := engine.Options{DataDir: b.TempDir(), Config: cfg}
		tune(&opts)
		e, err := engine.Open(opts)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { e.Close() })
		return e
	}
	off, onE := open(func(*engine.Options) {}), open(on)
	ctx := context.Background()
	ids := map[*engine.Engine][]string{}
	for _, e := range []*engine.Engine{off, onE} {
		for i := range 50 {
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
	run(onE, len(ids[onE]))
	b.ResetTimer()
	var r Result
	for round := 0; round < max(b.N, 5); round++ {
		var a, c time.Duration
		if round%2 == 0 {
			a = run(off, PerRound)
			c = run(onE, PerRound)
		} else {
			c = run(onE, PerRound)
			a = run(off, PerRound)
		}
		r.Off, r.On = r.Off+a, r.On+c
		r.Ratios = append(r.Ratios, float64(c)/float64(a))
	}
	b.StopTimer()
	slices.Sort(r.Ratios)
	return r
}
