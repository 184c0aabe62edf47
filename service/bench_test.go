package service

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/engine"
	"github.com/taskdeck/taskdeck/internal/waitfor"
	"github.com/taskdeck/taskdeck/model"
)

// rounds of each benchmark; in-process and socket runs alternate so that
// a noisy neighbour hits both alike.
const benchRounds = 7

// benchOwner serves the engine on a fresh store, with the demo server on
// loopback (no hostile front: the call costs what a real one does).
func benchOwner(b *testing.B) (*engine.Engine, deck.Deck, deck.CallRequest) {
	ctx := context.Background()
	mcp := httptest.NewServer(demo.New(demo.Options{Speed: 0.01}).Handler())
	b.Cleanup(mcp.Close)
	dir := b.TempDir()
	e, err := engine.Open(engine.Options{DataDir: dir})
	if err != nil {
		b.Fatal(err)
	}
	srv, err := Serve(ctx, dir, e, nil)
	if err != nil {
		b.Fatal(err)
	}
	r, err := Dial(ctx, dir)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		r.Close()
		srv.Shutdown(ctx)
		e.Close()
	})
	return e, r, deck.CallRequest{Server: model.ServerRef{URL: mcp.URL}, Tool: "sleep", Args: json.RawMessage(`{"seconds":600}`)}
}

// BenchmarkCallSocketVsInProcess: the same Call (tools/call to the demo
// server, the handle committed and synced) on the engine in process and
// through the owner's socket; the ratio's median and range over rounds.
func BenchmarkCallSocketVsInProcess(b *testing.B) {
	ctx := context.Background()
	e, r, req := benchOwner(b)
	const n = 100
	call := func(d deck.Deck) float64 {
		start := time.Now()
		if _, err := d.Call(ctx, req); err != nil {
			b.Fatal(err)
		}
		return float64(time.Since(start).Microseconds())
	}
	call(e) // warm both
	call(r)
	var ratios, inproc, socket []float64
	for b.Loop() {
		for range benchRounds {
			// Call by call, in alternating order: the store's sync varies
			// far more over a round than between two neighbouring calls.
			var is, ss []float64
			for k := range n {
				if k%2 == 0 {
					is, ss = append(is, call(e)), append(ss, call(r))
				} else {
					ss, is = append(ss, call(r)), append(is, call(e))
				}
			}
			inproc = append(inproc, median(is))
			socket = append(socket, median(ss))
			ratios = append(ratios, median(ss)/median(is))
		}
	}
	b.ReportMetric(median(ratios), "socket/inproc")
	b.ReportMetric(median(inproc), "µs/call-inproc")
	b.ReportMetric(median(socket), "µs/call-socket")
	b.Logf("call: in process median %.0f µs (%s), socket %.0f µs (%s); ratio median %.3f (%s) over %d rounds of %d calls each way",
		median(inproc), span(inproc, "%.0f"), median(socket), span(socket, "%.0f"), median(ratios), span(ratios, "%.3f"), len(ratios), n)
}

// BenchmarkFeedLatency: changes committed at 1,000 a second (records
// forgotten: a commit each, and nothing sent to a server, so that the
// 2-core machine keeps the rate), each timed from its arrival at a
// watcher in the owner's process (the engine publishes from its commit
// hook) to its arrival at a watcher on the socket; p50 and p99 per round.
func BenchmarkFeedLatency(b *testing.B) {
	ctx := context.Background()
	e, r, req := benchOwner(b)
	req.Tool, req.Args = "echo", json.RawMessage(`{"text":"hi"}`) // done at once: a record, no task
	const perRound = 1000
	var mu sync.Mutex
	gone := map[deck.Deck]map[string]time.Time{e: {}, r: {}}
	wctx, cancel := context.WithCancel(ctx)
	b.Cleanup(cancel) // before the owner's cleanup, which runs earlier-registered last
	for d := range gone {
		f, err := d.Watch(wctx, 0)
		if err != nil {
			b.Fatal(err)
		}
		go func() {
			for ev := range f.Events() {
				now := time.Now()
				mu.Lock()
				for _, id := range ev.Deleted {
					gone[d][id] = now
				}
				mu.Unlock()
			}
			if f.Err() != nil && wctx.Err() == nil {
				b.Errorf("the feed ended: %v", f.Err())
			}
		}()
	}
	var p50s, p99s, rates []float64
	for b.Loop() {
		for range benchRounds {
			ids := make(chan string, perRound)
			var wg sync.WaitGroup
			for range 4 {
				wg.Go(func() {
					for range perRound / 4 {
						res, err := e.Call(ctx, req)
						if err != nil {
							b.Error(err)
							return
						}
						ids <- res.Task.ID
					}
				})
			}
			wg.Wait()
			close(ids)
			start := time.Now()
			var forgot []string
			k := 0
			for id := range ids {
				// On a schedule, not a ticker: a ticker drops the ticks a
				// busy machine misses, and the rate with them.
				time.Sleep(time.Until(start.Add(time.Duration(k) * time.Millisecond)))
				k++
				forgot = append(forgot, id)
				wg.Go(func() {
					if err := e.Forget(ctx, id); err != nil {
						b.Error(err)
					}
				})
			}
			wg.Wait()
			rates = append(rates, perRound/time.Since(start).Seconds())
			// Each watcher stamps what it saw: when this sees it all does
			// not matter.
			waitfor.Within(b, 10*time.Second, "both watchers to see every change", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(gone[r]) >= len(forgot) && len(gone[e]) >= len(forgot)
			})
			var lat []float64
			mu.Lock()
			for _, id := range forgot {
				lat = append(lat, float64(gone[r][id].Sub(gone[e][id]).Microseconds()))
			}
			clear(gone[r])
			clear(gone[e])
			mu.Unlock()
			slices.Sort(lat)
			p50s = append(p50s, lat[len(lat)/2])
			p99s = append(p99s, lat[len(lat)*99/100])
		}
	}
	b.ReportMetric(median(p50s), "µs-p50")
	b.ReportMetric(median(p99s), "µs-p99")
	b.Logf("feed at %.0f changes/s (%s): p50 median %.0f µs (%s), p99 median %.0f µs (%s) over %d rounds of %d changes",
		median(rates), span(rates, "%.0f"), median(p50s), span(p50s, "%.0f"), median(p99s), span(p99s, "%.0f"), len(p99s), perRound)
}

func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	return s[len(s)/2]
}

func span(xs []float64, f string) string {
	return fmt.Sprintf(f+" to "+f, slices.Min(xs), slices.Max(xs))
}
