package main

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/internal/hostile"
	"github.com/taskdeck/taskdeck/model"
)

// TestRefusedCallFreesItsKey: the README's promise, from the command line.
// A call the server refused (no task was created) releases its key: the
// same call can be retried, and the corrected call made, under that key.
// The refusal comes from the server itself: an unknown tool or arguments
// that fail the schema are stopped before anything is sent.
func TestRefusedCallFreesItsKey(t *testing.T) {
	t.Parallel()
	srv := hostile.Start(t, demo.Options{Speed: 0.05})
	srv.On("tools/call", hostile.Error(-32602, "invalid params: the deploy window is closed"))
	d := newDeck(t)
	refused := []string{"call", "--url", srv.URL, "sleep", "--args", `{"seconds":600}`, "--key", "deploy-7"}
	if r := d.run(refused...); r.code == 0 {
		t.Fatalf("a refused call succeeded\n%s", r)
	}
	again := d.run(refused...)
	if again.code == 0 || strings.Contains(again.stderr, "update may not change") {
		t.Fatalf("the refused call retried under its key\n%s", again)
	}
	if n := len(srv.Requests("tools/call")); n != 2 {
		t.Fatalf("the retry did not reach the server: %d tools/call", n)
	}
	srv.On("tools/call", nil)
	r := d.run(refused...).must(t, 0)
	tk := d.getJSON(onlyID(t, r))
	if tk.Key != "deploy-7" || tk.Status != "working" {
		t.Fatalf("the corrected call: %+v; want a working task under key deploy-7", tk)
	}
}

// TestWatchTimeout: watch --timeout ends a watch on tasks that are still
// open, with exit code 7 and one line saying so; the tasks stay open.
func TestWatchTimeout(t *testing.T) {
	t.Parallel()
	srv := startDemo(t, "127.0.0.1:0")
	d := newDeck(t)
	id := onlyID(t, d.run("call", "--url", srv.url, "sleep", "--args", `{"seconds":600}`).must(t, 0))
	start := time.Now()
	w := d.run("watch", "--timeout", "1s").must(t, 7)
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("watch --timeout 1s took %s", took)
	}
	last := strings.Split(strings.TrimRight(w.stderr, "\n"), "\n")
	if l := last[len(last)-1]; !strings.Contains(l, "--timeout 1s ran out with 1 task still open") {
		t.Fatalf("last stderr line %q\n%s", l, w)
	}
	if tk := d.getJSON(id); tk.Status != "working" {
		t.Fatalf("after the timeout: %+v", tk)
	}
	oneErrorLine(t, d.run("watch", "--timeout", "-1s").must(t, exitUsage), "--timeout must not be negative")
}

// TestInputAskedAgainSaysTheAnswerWasNotTaken: an --input answer the
// server does not take (here invalid; a decline the server asks again for
// is the same) is not reported as input that was never given.
func TestInputAskedAgainSaysTheAnswerWasNotTaken(t *testing.T) {
	t.Parallel()
	srv := startDemo(t, "127.0.0.1:0")
	d := newDeck(t)
	r := d.run("call", "--url", srv.url, "confirm_first", "--input", `confirm={"action":"accept","content":{}}`).must(t, exitUsage)
	oneErrorLine(t, r, "did not take the answer given for confirm", "--input confirm=")
	if n := srv.stats(t).ToolCalls["confirm_first"]; n != 2 {
		t.Fatalf("%d tools/call of confirm_first, want the first and the answered one", n)
	}
}

// TestInputNotAskedForIsNamed: an --input key the server did not ask for
// is named, not silently dropped.
func TestInputNotAskedForIsNamed(t *testing.T) {
	t.Parallel()
	srv := startDemo(t, "127.0.0.1:0")
	d := newDeck(t)
	r := d.run("call", "--url", srv.url, "confirm_first", "--input", `confirn={"action":"accept","content":{"confirm":true}}`).must(t, exitUsage)
	oneErrorLine(t, r, "keys: confirm", "did not ask for --input confirn")
}

// TestCallWaitGivesUpOnAServerThatStopsAnswering: `call --wait` on a task
// whose every poll fails lets it go after the same five failed polls in a
// row as watch, with exit 3 and one line that says the task stays open,
// instead of polling for ever.
func TestCallWaitGivesUpOnAServerThatStopsAnswering(t *testing.T) {
	t.Parallel()
	srv := hostile.Start(t, demo.Options{Speed: 0.05, PollInterval: 20 * time.Millisecond})
	srv.On("tasks/get", hostile.HTTPStatus(http.StatusBadGateway))
	c := newInproc(t)
	c.policy = model.PollPolicy{Default: 20 * time.Millisecond, Floor: 10 * time.Millisecond, Cap: 50 * time.Millisecond, Growth: 1.6}
	r := c.run("call", "--url", srv.URL, "sleep", "--args", `{"seconds":600}`, "--wait").must(t, exitUnreachable)
	lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
	for _, w := range []string{"taskdeck: gave up following task", "5 failed polls in a row", "taskdeck watch"} {
		if !strings.Contains(lines[len(lines)-1], w) {
			t.Fatalf("the last stderr line should say %q\n%s", w, r)
		}
	}
	if n := len(srv.Requests("tasks/get")); n != 5 {
		t.Fatalf("%d tasks/get before giving up, want 5", n)
	}
}

// TestInputNobodyAskedForIsReported: an --input answer that no request
// asked for, before or inside the task, is said to be unsent.
func TestInputNobodyAskedForIsReported(t *testing.T) {
	t.Parallel()
	c := newInproc(t)
	r := c.run("call", "--url", demoURL(t), "echo", "--args", `{"text":"hi"}`, "--wait", "--input", `aprove-1={"action":"accept"}`).must(t, exitOK)
	if !strings.Contains(r.stderr, "--input aprove-1 was not sent") {
		t.Fatalf("no word of the unused --input\n%s", r)
	}
}
