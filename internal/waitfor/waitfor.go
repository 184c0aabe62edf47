// Package waitfor is how taskdeck's tests wait: for a condition they can
// check, with a deadline, never for a fixed time.
package waitfor

import (
	"os"
	"strconv"
	"testing"
	"time"
)

// every is how often Within checks its condition again.
const every = 5 * time.Millisecond

// Slowdown is how much slower than a quiet 2-core machine this one may
// be: TASKDECK_TEST_SLOWDOWN (a number ≥ 1; .ci/run sets it), else 1.
// Every deadline a test waits against is multiplied by it, so that a busy
// machine makes a test slower, never red.
var Slowdown = func() float64 {
	f, err := strconv.ParseFloat(os.Getenv("TASKDECK_TEST_SLOWDOWN"), 64)
	if err != nil || f < 1 {
		return 1
	}
	return f
}()

// Scale is d under Slowdown.
func Scale(d time.Duration) time.Duration { return time.Duration(float64(d) * Slowdown) }

// Within checks cond until it holds, failing the test with what it waited
// for once d (scaled) has passed.
func Within(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	d = Scale(d)
	if !Until(d, every, cond) {
		t.Fatalf("gave up after %v waiting for %s", d, what)
	}
}

// Until checks cond every step until it holds or d has passed, and tells
// which: for a caller that measures when cond came true (a finer step) or
// says more than Within can when it did not.
func Until(d, step time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(step)
	}
	return true
}
