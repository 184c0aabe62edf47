package proxy

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/engine"
	"github.com/taskdeck/taskdeck/internal/storefill"
	"github.com/taskdeck/taskdeck/internal/waitfor"
	"github.com/taskdeck/taskdeck/service"
)

// flatOpen is how many open records each store holds besides its
// finished ones.
const flatOpen = 1000

// flatSizes are the numbers of finished records the watcher benchmark
// compares, the first the baseline. TASKDECK_BENCH_1M=1 adds 1,000,000:
// the store takes minutes to build on a busy 2-core machine (100,000
// took a minute at load 13).
func flatSizes() []int {
	sizes := []int{1000, 100_000}
	if os.Getenv("TASKDECK_BENCH_1M") == "1" {
		sizes = append(sizes, 1_000_000)
	}
	return sizes
}

// watchSample is one watcher's start: the time from its call to its
// first event, and what the process holds and allocated once its whole
// snapshot is in (after a GC, over what it held before the call).
type watchSample struct {
	first        time.Duration
	heap, allocs float64
}

// BenchmarkWatcherFlatInFinished: on stores of 1,000 open and N finished
// records, each served by its owner, two watchers start in turn: one
// through the owner's socket with the dashboard's window (the open
// records and the newest 1,000 finished), and the proxy's hub (open
// records only) following a client of the socket. Each round visits
// every store; each N is given against N = 1,000.
func BenchmarkWatcherFlatInFinished(b *testing.B) {
	ctx := context.Background()
	sizes := flatSizes()
	clients := make([]deck.Deck, len(sizes))
	for i, n := range sizes {
		dir := b.TempDir()
		start := time.Now()
		if err := storefill.Fill(dir, flatOpen, n); err != nil {
			b.Fatal(err)
		}
		b.Logf("store of %d open + %d finished built in %v", flatOpen, n, time.Since(start).Round(time.Millisecond))
		e, err := engine.Open(engine.Options{DataDir: dir})
		if err != nil {
			b.Fatal(err)
		}
		srv, err := service.Serve(ctx, dir, e, nil)
		if err != nil {
			b.Fatal(err)
		}
		c, err := service.Dial(ctx, dir)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() {
			c.Close()
			srv.Shutdown(ctx)
			e.Close()
		})
		clients[i] = c
	}
	watchers := []struct {
		name  string
		start func(deck.Deck) (watchSample, error)
	}{
		{"socket, the dashboard's window", func(d deck.Deck) (watchSample, error) {
			return socketWatch(ctx, d, deck.Window{Finished: 1000}) // ui's pageSize
		}},
		{"the proxy's hub", func(d deck.Deck) (watchSample, error) { return hubWatch(b, d) }},
	}
	const rounds = 7
	samples := make([][][]watchSample, len(watchers))
	for w := range watchers {
		samples[w] = make([][]watchSample, len(sizes))
	}
	for b.Loop() {
		for range rounds {
			for i, c := range clients {
				for w, wt := range watchers {
					s, err := wt.start(c)
					if err != nil {
						b.Fatal(err)
					}
					samples[w][i] = append(samples[w][i], s)
				}
			}
		}
	}
	for w, wt := range watchers {
		for i, n := range sizes {
			ss, base := samples[w][i], samples[w][0]
			f, h, a := med(ss, firstMs), med(ss, heapKiB), med(ss, allocCount)
			b.ReportMetric(f, fmt.Sprintf("first-ms@%d-w%d", n, w))
			b.ReportMetric(h, fmt.Sprintf("heap-KiB@%d-w%d", n, w))
			b.Logf("w%d %s, %d finished + %d open: first event %.2f ms (%.2f to %.2f) %.2fx; heap %.0f KiB %.2fx; allocs %.0f %.2fx; %d rounds",
				w, wt.name, n, flatOpen, f, slices.Min(each(ss, firstMs)), slices.Max(each(ss, firstMs)), f/med(base, firstMs),
				h, h/med(base, heapKiB), a, a/med(base, allocCount), len(ss))
		}
	}
}

// socketWatch watches d with window w until its snapshot is whole.
func socketWatch(ctx context.Context, d deck.Deck, w deck.Window) (watchSample, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	before := heapNow()
	t0 := time.Now()
	feed, err := d.WatchWindow(wctx, 0, w)
	if err != nil {
		return watchSample{}, err
	}
	var s watchSample
	var held []deck.Event
	for ev := range feed.Events() {
		if len(held) == 0 {
			s.first = time.Since(t0)
		}
		held = append(held, ev)
		if !ev.More {
			break
		}
	}
	if len(held) == 0 {
		return watchSample{}, fmt.Errorf("the feed ended before its first event: %v", feed.Err())
	}
	s.heap, s.allocs = heapSince(before)
	runtime.KeepAlive(held)
	return s, nil
}

// hubWatch starts a proxy hub on d: the first event is the wake its
// waiter hears from the snapshot; the heap is taken once the hub's feed
// has the whole snapshot.
func hubWatch(b *testing.B, d deck.Deck) (watchSample, error) {
	before := heapNow()
	t0 := time.Now()
	h := newHub(d, slog.New(slog.NewTextHandler(io.Discard, nil)))
	defer h.close()
	ch, stop, err := h.wait("no-such-task")
	if err != nil {
		return watchSample{}, err
	}
	defer stop()
	<-ch
	s := watchSample{first: time.Since(t0)}
	whole := func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.feed != nil && h.feed.Rev() > 0
	}
	waitfor.Within(b, 10*time.Second, "the hub's snapshot to be whole", whole)
	s.heap, s.allocs = heapSince(before)
	runtime.KeepAlive(h)
	return s, nil
}

func heapNow() runtime.MemStats {
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m
}

// heapSince is the heap held (after a GC) and the allocations made since
// before.
func heapSince(before runtime.MemStats) (heap, allocs float64) {
	after := heapNow()
	return float64(after.HeapAlloc) - float64(before.HeapAlloc), float64(after.Mallocs - before.Mallocs)
}

func firstMs(s watchSample) float64    { return float64(s.first.Microseconds()) / 1000 }
func heapKiB(s watchSample) float64    { return s.heap / 1024 }
func allocCount(s watchSample) float64 { return s.allocs }

func each(ss []watchSample, f func(watchSample) float64) []float64 {
	xs := make([]float64, len(ss))
	for i, s := range ss {
		xs[i] = f(s)
	}
	return xs
}

func med(ss []watchSample, f func(watchSample) float64) float64 {
	xs := slices.Sorted(slices.Values(each(ss, f)))
	return xs[len(xs)/2]
}
