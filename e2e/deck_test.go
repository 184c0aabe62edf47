package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/internal/clitest"
	"github.com/taskdeck/taskdeck/internal/hostile"
)

// TestWatchPollsEachOpenTaskOnceAtStart: watch starts with one tasks/get
// per open task (the start-up reconcile), then polls as the server asks
// (here every 5 s): within its first second it sends nothing more.
func TestWatchPollsEachOpenTaskOnceAtStart(t *testing.T) {
	t.Parallel()
	srv := hostile.Start(t, demo.Options{Speed: 0.05, PollInterval: 5 * time.Second})
	d := newDeck(t)
	for range 3 {
		clitest.OnlyID(t, d.run("call", "--url", srv.URL, "sleep", "--args", `{"seconds":600}`).Must(t, exitOK))
	}
	before := len(srv.Requests("tasks/get"))
	w := d.run("watch", "--timeout", "1s").Must(t, exitTimedOut)
	clitest.MustContain(t, w, w.Stdout, "reconciled: 3 re-attached")
	if n := len(srv.Requests("tasks/get")) - before; n != 3 {
		t.Fatalf("watch sent %d tasks/get in its first second for 3 open tasks, want 3\n%s", n, w)
	}
}

// TestCallWithInputBeforeTheTaskSendsTwoCalls: a call whose server asks
// for input before the task exists, answered with --input, costs two
// tools/call (the first, and the answered one) and leaves one record.
func TestCallWithInputBeforeTheTaskSendsTwoCalls(t *testing.T) {
	t.Parallel()
	srv := startDemo(t, "127.0.0.1:0")
	d := newDeck(t)
	r := d.run("call", "--url", srv.url, "confirm_first", "--wait",
		"--input", `confirm={"action":"accept","content":{"confirm":true}}`).Must(t, exitOK)
	clitest.MustContain(t, r, r.Stdout, " completed ", "confirmed")
	if strings.Contains(r.Stderr, "was not sent") {
		t.Fatalf("the --input that was sent is said not to be\n%s", r)
	}
	if n := srv.stats(t).ToolCalls["confirm_first"]; n != 2 {
		t.Fatalf("%d tools/call of confirm_first, want 2", n)
	}
	if tasks := d.ls(); len(tasks) != 1 || tasks[0].Status != "completed" {
		t.Fatalf("want one completed record, got %+v", tasks)
	}
}

// TestAnswerACallThatWaitsBeforeItsTask: a call whose server asks for
// input before it starts the task, made without an answer and without a
// terminal, exits 5 and keeps its record; `taskdeck answer` later sends
// the answered round (the second tools/call) and the task runs to its end.
func TestAnswerACallThatWaitsBeforeItsTask(t *testing.T) {
	t.Parallel()
	srv := startDemo(t, "127.0.0.1:0")
	d := newDeck(t)
	r := d.run("call", "--url", srv.url, "confirm_first").Must(t, exitWaiting)
	clitest.OneErrorLine(t, r, "waits for input before it starts", "keys: confirm")
	tasks := d.ls()
	if len(tasks) != 1 || tasks[0].Status != "input_required" || tasks[0].TaskID != "" {
		t.Fatalf("want the call kept, waiting for input before its task: %+v", tasks)
	}
	id := tasks[0].ID
	d.run("answer", id, "confirm", `{"action":"accept","content":{"confirm":true}}`).Must(t, exitOK)
	if got := d.waitStatus(id, "completed"); !strings.Contains(got.resultText(), "confirmed") {
		t.Fatalf("the answered call: %+v", got)
	}
	if n := srv.stats(t).ToolCalls["confirm_first"]; n != 2 {
		t.Fatalf("%d tools/call of confirm_first, want 2", n)
	}
}
