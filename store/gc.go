package store

import (
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// OwnerGCPercent is the Go heap target an owner keeps (GOGC): the runtime
// collects once the heap has grown this many percent over the live data,
// and RSS follows the heap. A task flipping 10,000 times with a 4 KB
// message (BenchmarkFlippingTask, ~15 MB of live heap growth) grew RSS by
// 36.7 MB at Go's default 100, 29.9 MB at 50 and 24.4 MB at 25, for 14%
// and 38% more CPU (three processes side by side). A fixed soft memory
// limit (32 MiB: 22.2 MB) is not used: an owner whose live heap nears it
// (31 MiB with 10,000 tasks watched) would spend up to half its CPU (the
// runtime's cap) collecting; the limit follows the live heap instead
// (followLiveHeap).
const OwnerGCPercent = 50

// TuneOwnerGC sets OwnerGCPercent for this process, unless GOGC is set in
// its environment: the one who set it chose. Unless GOMEMLIMIT is set too,
// it also keeps a soft memory limit that follows the live heap
// (followLiveHeap). A process that owns a store for long (taskdeck serve)
// calls it once at start-up; restore sets back the percent and the limit
// it replaced (benchmarks that measure as an owner).
func TuneOwnerGC() (restore func()) {
	if os.Getenv("GOGC") != "" {
		return func() {}
	}
	old := debug.SetGCPercent(OwnerGCPercent)
	stop := func() {}
	if os.Getenv("GOMEMLIMIT") == "" {
		stop = followLiveHeap(OwnerGCPercent)
	}
	return func() {
		stop()
		debug.SetGCPercent(old)
	}
}

// followLiveHeap re-sets the soft memory limit after every collection to
// the heap target GC percent gives the live heap (with the runtime's own
// minimum), plus a headroom and the runtime's memory outside the heap. The
// limit does not make the owner collect sooner; it makes the runtime give
// back at once the freed heap above its target, which it otherwise returns
// at about 1% of a CPU's time: on a busy machine the owner of a flipping
// task (BenchmarkFlippingTask) kept 5–14 MB of freed heap resident, and
// its RSS over 10,000 flips went over 20 MB in some runs. Re-set above the
// live heap after every collection, the limit follows an owner whose heap
// grows, never holding it below what is live as a fixed limit would. It
// costs CPU where writes never pause (pages handed back and faulted in
// again): in the flipping loop about a fifth more of the process's CPU
// (BenchmarkOwnerLimitCost). stop sets back the limit it replaced.
func followLiveHeap(percent int) (stop func()) {
	f := &limitFollower{percent: uint64(percent), old: debug.SetMemoryLimit(-1), samples: make([]metrics.Sample, len(limitMetrics))}
	for i, name := range limitMetrics {
		f.samples[i].Name = name
	}
	f.collected()
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.stopped = true
		debug.SetMemoryLimit(f.old)
	}
}

// limitMetrics are what limitFor reads, in its order.
var limitMetrics = []string{
	"/gc/heap/live:bytes",
	"/memory/classes/total:bytes",
	"/memory/classes/heap/objects:bytes",
	"/memory/classes/heap/free:bytes",
	"/memory/classes/heap/released:bytes",
}

type limitFollower struct {
	percent uint64
	old     int64

	mu      sync.Mutex
	stopped bool
	samples []metrics.Sample
}

// collected sets the limit from the last collection's live heap and arms
// itself for the next one: a cleanup runs once the object it watches is
// found unreachable, that is after the next collection.
func (f *limitFollower) collected() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped {
		return
	}
	metrics.Read(f.samples)
	var v [5]uint64
	for i, s := range f.samples {
		if s.Value.Kind() == metrics.KindUint64 {
			v[i] = s.Value.Uint64()
		}
	}
	if limit := limitFor(f.percent, v[0], v[1]-v[2]-v[3]-v[4]); limit > 0 {
		debug.SetMemoryLimit(limit)
	}
	runtime.AddCleanup(new(gcWatch), func(f *limitFollower) { f.collected() }, f)
}

// gcWatch is an object no one keeps; it is big enough to get a heap slot
// of its own (a smaller one without pointers may share a tiny block and
// outlive collections).
type gcWatch [16]byte

// minHeapGrowth is how far the runtime lets a heap grow at GC percent 100
// however small it is (4 MiB × GOGC/100): a small heap is not collected
// after every few allocations.
const minHeapGrowth = 4 << 20

// limitFor is the soft memory limit for a heap of live bytes under GC
// percent, where the runtime holds nonHeap bytes outside the heap's
// objects and free pages (heap fragments, stacks, its metadata): the heap
// target, a headroom of 10% of it (at least 1 MiB) and nonHeap. The
// runtime collects 3% below a limit and its scavenger works 5% below it;
// at 3% the owner handed back pages its heap took again at once and spent
// half again its CPU. 0: no collection yet.
func limitFor(percent, live, nonHeap uint64) int64 {
	if live == 0 {
		return 0
	}
	goal := live + max(live, minHeapGrowth)*percent/100
	headroom := max(goal/10, 1<<20)
	return int64(min(goal+headroom+nonHeap, math.MaxInt64))
}
