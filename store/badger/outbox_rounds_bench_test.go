//go:build unix

package badger

import (
	"fmt"
	"runtime/metrics"
	"slices"
	"syscall"
	"testing"
	"time"
)

// BenchmarkOutboxWriteRounds: the outbox's cost on a durable write (one
// writer, each create waiting for its own sync), against a store with no
// endpoint, in many short rounds: each round makes perRound creates in
// each of the three stores of BenchmarkOutboxWriteCost, the order turning
// round by round, so that what the machine does meanwhile (other
// processes, Badger's compactions) falls on all alike. Wall time on a
// shared machine is noisier than the effect, so each round also measures
// the process's CPU time (user+sys, every goroutine's) and the bytes the
// writes allocate, which a busy neighbour does not move.
//
// For each of "every" (an event with each write: the worst case) and
// "unwanted" (an event function that wants none): the ratio to "none" of
// wall time, CPU and allocated bytes, median over the rounds
// (x-wall-every, x-cpu-every, x-alloc-every) and the 10th to 90th
// percentile range (p10-/p90-x-...). Run with -benchtime 400x or more.
func BenchmarkOutboxWriteRounds(b *testing.B) {
	const perRound = 8
	names, stores := outboxStores(b)
	type cost struct{ wall, cpu, alloc float64 }
	per := make([][]cost, len(names)) // per store, per round
	allocs := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	sample := func() (time.Time, time.Duration, uint64) {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			b.Fatal(err)
		}
		metrics.Read(allocs)
		return time.Now(), time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), allocs[0].Value.Uint64()
	}
	b.ResetTimer()
	for round := range b.N {
		for k := range names {
			j := (round + k) % len(names)
			w0, c0, a0 := sample()
			for i := range perRound {
				if err := stores[j].Create(benchRecord(round*perRound+i, true)); err != nil {
					b.Fatal(err)
				}
			}
			w1, c1, a1 := sample()
			per[j] = append(per[j], cost{float64(w1.Sub(w0)), float64(c1 - c0), float64(a1 - a0)})
		}
	}
	b.StopTimer()
	if b.N < 20 {
		return // too few rounds for percentiles (the first, sizing run)
	}
	for j, name := range names[1:] {
		j++
		for _, m := range []struct {
			unit string
			of   func(cost) float64
		}{{"wall", func(c cost) float64 { return c.wall }}, {"cpu", func(c cost) float64 { return c.cpu }}, {"alloc", func(c cost) float64 { return c.alloc }}} {
			var r []float64
			for i := range per[j] {
				if base := m.of(per[0][i]); base > 0 {
					r = append(r, m.of(per[j][i])/base)
				}
			}
			slices.Sort(r)
			b.ReportMetric(r[len(r)/2], fmt.Sprintf("x-%s-%s", m.unit, name))
			b.ReportMetric(r[len(r)/10], fmt.Sprintf("p10-x-%s-%s", m.unit, name))
			b.ReportMetric(r[len(r)*9/10], fmt.Sprintf("p90-x-%s-%s", m.unit, name))
		}
	}
	// The rounds' totals: the ratio of sums, which a few slow rounds move
	// more than the median.
	for j, name := range names {
		var w, c float64
		for _, x := range per[j] {
			w, c = w+x.wall, c+x.cpu
		}
		b.ReportMetric(w/float64(b.N*perRound), name+"-wall-ns/write")
		b.ReportMetric(c/float64(b.N*perRound), name+"-cpu-ns/write")
	}
}
