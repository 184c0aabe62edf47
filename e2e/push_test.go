package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/internal/waitfor"
)

// TestCallWaitSeesTheEndOfASleep: `call --wait` on the demo's 5-second
// sleep returns within 0.3 s of its end where the server pushes, and
// within the polling bound where it does not: a task that ends at age A
// is noticed within max(pollIntervalMs, A/10 × 1.1) plus a request, here
// the demo's 500 ms. The run's wall time holds the command's own start
// and exit too, so each bound gets 0.3 s more for those.
func TestCallWaitSeesTheEndOfASleep(t *testing.T) {
	t.Parallel()
	const run = 5 * time.Second
	for _, c := range []struct {
		name  string
		flags []string
		late  time.Duration
	}{
		{"push", nil, 300 * time.Millisecond},
		{"polling", []string{"--no-push"}, 550 * time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			srv := startDemo(t, "127.0.0.1:0", append([]string{"--speed", "1"}, c.flags...)...)
			d := newDeck(t)
			start := time.Now()
			r := d.run("call", "--url", srv.url, "sleep", "--args", `{"seconds":5}`, "--wait").Must(t, exitOK)
			took := time.Since(start)
			if !strings.Contains(r.Stdout, "completed") {
				t.Fatalf("call --wait did not see the end\n%s", r)
			}
			// The lateness allowed (the mode's own, and the process's start)
			// grows with TASKDECK_TEST_SLOWDOWN; the sleep itself does not.
			if bound := run + waitfor.Scale(c.late+300*time.Millisecond); took > bound {
				t.Fatalf("%s: call --wait took %s for a %s sleep, want at most %s", c.name, took.Round(time.Millisecond), run, bound)
			}
			t.Logf("%s: call --wait took %s for a %s sleep", c.name, took.Round(time.Millisecond), run)
		})
	}
}
