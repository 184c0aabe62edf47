package cli

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/internal/hostile"
	"github.com/taskdeck/taskdeck/mcpclient/wire"
	"github.com/taskdeck/taskdeck/model"
)

// TestCallWaitGivesUpOnAServerThatStopsAnswering: `call --wait` on a task
// whose every poll fails lets it go after the same five failed polls in a
// row as watch, with exit 3 and one line that says the task stays open,
// instead of polling for ever.
func TestCallWaitGivesUpOnAServerThatStopsAnswering(t *testing.T) {
	t.Parallel()
	srv := hostile.Start(t, demo.Options{Speed: 0.05, PollInterval: 20 * time.Millisecond})
	// A server that stops answering answers neither polls nor push.
	srv.On("tasks/get", hostile.HTTPStatus(http.StatusBadGateway))
	srv.On(wire.MethodListen, hostile.HTTPStatus(http.StatusBadGateway))
	c := newInproc(t)
	c.policy = model.PollPolicy{Default: 20 * time.Millisecond, Floor: 10 * time.Millisecond, Cap: 50 * time.Millisecond, Growth: 1.6}
	r := c.run("call", "--url", srv.URL, "sleep", "--args", `{"seconds":600}`, "--wait").Must(t, exitUnreachable)
	lines := strings.Split(strings.TrimRight(r.Stderr, "\n"), "\n")
	for _, w := range []string{"taskdeck: gave up following task", "5 failed polls in a row", "taskdeck watch"} {
		if !strings.Contains(lines[len(lines)-1], w) {
			t.Fatalf("the last stderr line should say %q\n%s", w, r)
		}
	}
	if n := strings.Count(r.Stderr, "poll failed"); n != 5 {
		t.Fatalf("%d failed polls reported before giving up, want 5\n%s", n, r)
	}
	// The engine polls on its own schedule until the command closes it: a
	// poll or two (50 ms apart at this policy's cap) may start meanwhile.
	if n := len(srv.Requests("tasks/get")); n < 5 || n > 7 {
		t.Fatalf("%d tasks/get, want the 5 before giving up and at most 2 more while the command closed", n)
	}
}

// TestInputNobodyAskedForIsReported: an --input answer that no request
// asked for, before or inside the task, is said to be unsent.
func TestInputNobodyAskedForIsReported(t *testing.T) {
	t.Parallel()
	c := newInproc(t)
	r := c.run("call", "--url", demoURL(t), "echo", "--args", `{"text":"hi"}`, "--wait", "--input", `aprove-1={"action":"accept"}`).Must(t, exitOK)
	if !strings.Contains(r.Stderr, "--input aprove-1 was not sent") {
		t.Fatalf("no word of the unused --input\n%s", r)
	}
}
