package service

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/deck"
)

// rounds of each benchmark; in-process and socket runs alternate so that
// a noisy neighbour hits both alike.
const benchRounds = 7

// BenchmarkCallSocketVsInProcess: the same Call (a record committed and
// synced) on the deck in process and through the owner's socket; the
// ratio's median and range over interleaved rounds.
func BenchmarkCallSocketVsInProcess(b *testing.B) {
	ctx := context.Background()
	dir := b.TempDir()
	d, err := openStoreDeck(b, dir, newRevLog())
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	srv, err := Serve(ctx, dir, d, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Shutdown(ctx)
	r, err := Dial(ctx, dir)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	const n = 200
	call := func(dk deck.Deck) float64 {
		start := time.Now()
		if _, err := dk.Call(ctx, sleepCall("")); err != nil {
			b.Fatal(err)
		}
		return float64(time.Since(start).Microseconds())
	}
	call(d) // warm both
	call(r)
	var ratios, inproc, socket []float64
	for b.Loop() {
		for range benchRounds {
			// Call by call, in alternating order: the store's sync varies
			// far more over a round than between two neighbouring calls.
			var is, ss []float64
			for k := range n {
				if k%2 == 0 {
					is, ss = append(is, call(d)), append(ss, call(r))
				} else {
					ss, is = append(ss, call(r)), append(is, call(d))
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

// BenchmarkFeedLatency: changes committed at 1,000 a second, each timed
// from its publication in the owner to its arrival at a watcher on the
// socket; p50 and p99 per round.
func BenchmarkFeedLatency(b *testing.B) {
	ctx := context.Background()
	dir := b.TempDir()
	log := newRevLog()
	d, err := openStoreDeck(b, dir, log)
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	srv, err := Serve(ctx, dir, d, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Shutdown(ctx)
	r, err := Dial(ctx, dir)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	const perRound = 1000
	var p50s, p99s, rates []float64
	for b.Loop() {
		for range benchRounds {
			wctx, cancel := context.WithCancel(ctx)
			_, _, from := log.since(0)
			feed, err := r.Watch(wctx, from)
			if err != nil {
				b.Fatal(err)
			}
			lat := make([]float64, 0, perRound)
			got := make(chan struct{})
			go func() {
				defer close(got)
				for ev := range feed.Events() {
					if ev.Kind != deck.EventChange {
						continue
					}
					lat = append(lat, float64(time.Since(log.at(ev.Rev)).Microseconds()))
					if len(lat) == perRound {
						return
					}
				}
			}()
			start := time.Now()
			var wg sync.WaitGroup
			for k := range perRound {
				// On a schedule, not a ticker: a ticker drops the ticks a
				// busy machine misses, and the rate with them.
				time.Sleep(time.Until(start.Add(time.Duration(k) * time.Millisecond)))
				wg.Go(func() {
					if _, err := d.Call(ctx, sleepCall("")); err != nil {
						b.Error(err)
					}
				})
			}
			wg.Wait()
			<-got
			rates = append(rates, perRound/time.Since(start).Seconds())
			cancel()
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
