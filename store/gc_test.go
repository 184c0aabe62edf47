package store

import (
	"math"
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/internal/waitfor"
)

// An owner keeps a smaller heap than Go's default, unless GOGC chose, and
// restore gives back the percent it replaced.
func TestTuneOwnerGC(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	for _, c := range []struct {
		env  string
		want int
	}{{"", OwnerGCPercent}, {"100", 100}} {
		t.Setenv("GOGC", c.env)
		debug.SetGCPercent(100)
		restore := TuneOwnerGC()
		if got := debug.SetGCPercent(100); got != c.want {
			t.Errorf("GOGC=%q: the GC percent is %d, want %d", c.env, got, c.want)
		}
		debug.SetGCPercent(c.want)
		restore()
		if got := debug.SetGCPercent(100); got != 100 {
			t.Errorf("GOGC=%q: after restore the GC percent is %d, want 100", c.env, got)
		}
	}
}

// An owner's soft memory limit follows its live heap: set at once, it
// rises after collections with a heap that grows (an owner with a big
// heap is never held below it), restore lifts it, and a GOMEMLIMIT in the
// environment wins.
func TestOwnerMemoryLimitFollowsLiveHeap(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(math.MaxInt64))
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	runtime.GC()
	restore := TuneOwnerGC()
	small := debug.SetMemoryLimit(-1)
	if small >= 64<<20 {
		t.Fatalf("the limit for this test's small heap is %d MiB, want one below 64", small>>20)
	}
	live := make([]byte, 64<<20)
	want := int64(len(live)) + int64(len(live))*OwnerGCPercent/100
	waitfor.Within(t, 10*time.Second, "a limit over a 64 MiB live heap and its GC target", func() bool {
		runtime.GC()
		l := debug.SetMemoryLimit(-1)
		return l >= want && l < math.MaxInt64
	})
	runtime.KeepAlive(live)
	restore()
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Errorf("after restore the limit is %d, want none", got)
	}

	t.Setenv("GOMEMLIMIT", "1GiB")
	restore = TuneOwnerGC()
	defer restore()
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Errorf("with GOMEMLIMIT set the owner set a limit of %d", got)
	}
}

// The limit is the heap target of GC percent (with the runtime's minimum
// growth), plus the headroom the runtime keeps below a limit and its
// memory outside the heap.
func TestLimitFor(t *testing.T) {
	if got := limitFor(50, 0, 5<<20); got != 0 {
		t.Errorf("before a collection: %d, want 0 (no limit)", got)
	}
	for _, c := range []struct{ live, nonHeap, want uint64 }{
		{2 << 20, 5 << 20, 4<<20 + 1<<20 + 5<<20},          // the minimum growth, 1 MiB headroom
		{100 << 20, 8 << 20, 150<<20 + 150<<20/10 + 8<<20}, // half the live heap, 10% headroom
	} {
		if got := limitFor(50, c.live, c.nonHeap); got != int64(c.want) {
			t.Errorf("limitFor(50, %d, %d) = %d, want %d", c.live, c.nonHeap, got, c.want)
		}
	}
}
