//go:build unix

package badger

import (
	"fmt"
	"github.com/taskdeck/taskdeck/internal/cputime"
	"math/rand/v2"
	"runtime/metrics"
	"slices"
	"strings"
	"testing"
	"time"
)

// BenchmarkOutboxWriteRounds: the outbox's cost on a durable write (one
// writer, each create waiting for its own sync), against a store with no
// endpoint, in many short rounds: each round makes perRound creates in
// each of the three stores of BenchmarkOutboxWriteCost, the order turning
// round by round, so that what the machine does meanwhile (other
// processes, Badger's compactions) falls on all alike. Each round
// measures wall time, the process's CPU time (user+sys of every
// goroutine, from getrusage: a busy neighbour takes the CPU away but
// does not add to it) and the bytes the writes allocate.
//
// For "every" (an event with each write: the worst case) and "unwanted"
// (an event function that wants none), per measure: the ratio of its
// total over all rounds to the total of "none" (x-cpu-every, ...), and
// the 95% confidence interval of that ratio (lo95-/hi95-x-...), from
// 2000 bootstrap resamples of the rounds, each round's three stores kept
// together. A ratio of single rounds swings from 0.4 to 3 on a loaded
// machine; the interval says how well the totals pin the ratio down
// instead. Background work (a compaction of one store running in another
// store's round) is process-wide and spread over all three by the
// turning order, which biases the CPU ratio towards 1 by its share.
// "unwanted" writes what "none" does, so its ratio is a control: where it
// strays from 1 beyond its interval, the stores differ by more than the
// rounds show (a store's flushes and compactions falling unevenly), and
// the intervals are too narrow by as much. Run with -benchtime 1000x or
// more.
func BenchmarkOutboxWriteRounds(b *testing.B) {
	const perRound = 4
	names, stores := outboxStores(b)
	type cost struct{ wall, cpu, alloc float64 }
	per := make([][]cost, len(names)) // per store, per round
	allocs := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	sample := func() (time.Time, time.Duration, uint64) {
		metrics.Read(allocs)
		return time.Now(), cputime.Used(b), allocs[0].Value.Uint64()
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
	if b.N < 50 {
		return // too few rounds for an interval (the first, sizing run)
	}
	measures := []struct {
		unit string
		of   func(cost) float64
	}{{"wall", func(c cost) float64 { return c.wall }}, {"cpu", func(c cost) float64 { return c.cpu }}, {"alloc", func(c cost) float64 { return c.alloc }}}
	for j, name := range names[1:] {
		j++
		for _, m := range measures {
			ratio, lo, hi := totalRatio(per[j], per[0], m.of)
			b.ReportMetric(ratio, fmt.Sprintf("x-%s-%s", m.unit, name))
			b.ReportMetric(lo, fmt.Sprintf("lo95-x-%s-%s", m.unit, name))
			b.ReportMetric(hi, fmt.Sprintf("hi95-x-%s-%s", m.unit, name))
		}
	}
	// What "every" adds to each write: the event's body, and the bytes
	// the store keeps of it.
	body := benchEventBody(b)
	stored, err := eventValue("msg_"+strings.Repeat("X", 26), time.Now(), body)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(len(body)), "event-body-B")
	b.ReportMetric(float64(len(stored)), "event-stored-B")
	for j, name := range names {
		var w, c float64
		for _, x := range per[j] {
			w, c = w+x.wall, c+x.cpu
		}
		b.ReportMetric(w/float64(b.N*perRound), name+"-wall-ns/write")
		b.ReportMetric(c/float64(b.N*perRound), name+"-cpu-ns/write")
	}
}

// totalRatio is the ratio of the sums of of over a's rounds and base's,
// and its 95% bootstrap interval: resampling the rounds with replacement
// (the same rounds for both, which shared the machine's state), 2000
// times, from a fixed seed.
func totalRatio[T any](a, base []T, of func(T) float64) (ratio, lo, hi float64) {
	const resamples = 2000
	sum := func(xs []T, idx []int) float64 {
		var s float64
		for _, i := range idx {
			s += of(xs[i])
		}
		return s
	}
	idx := make([]int, len(a))
	for i := range idx {
		idx[i] = i
	}
	ratio = sum(a, idx) / sum(base, idx)
	rng := rand.New(rand.NewPCG(27, 1))
	rs := make([]float64, resamples)
	for r := range rs {
		for i := range idx {
			idx[i] = rng.IntN(len(a))
		}
		rs[r] = sum(a, idx) / sum(base, idx)
	}
	slices.Sort(rs)
	return ratio, rs[resamples*25/1000], rs[resamples*975/1000]
}
