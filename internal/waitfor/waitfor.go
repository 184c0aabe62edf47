// Package waitfor is how taskdeck's tests wait: for a condition they can
// check, with a deadline, never for a fixed time.
package waitfor

import (
	"testing"
	"time"
)

// every is how often the condition is checked again.
const every = 5 * time.Millisecond

// Within checks cond until it holds, failing the test with what it waited
// for once d has passed.
func Within(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up after %v waiting for %s", d, what)
		}
		time.Sleep(every)
	}
}
