// Package waitfor is how taskdeck's tests wait: for a condition they can
// check, with a deadline, never for a fixed time.
package waitfor

import (
	"testing"
	"time"
)

// every is how often Within checks its condition again.
const every = 5 * time.Millisecond

// Within checks cond until it holds, failing the test with what it waited
// for once d has passed.
func Within(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
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
