package store

import (
	"runtime/debug"
	"testing"
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
