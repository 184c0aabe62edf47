package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/internal/clitest"
	"github.com/taskdeck/taskdeck/internal/hostile"
	"github.com/taskdeck/taskdeck/internal/waitfor"
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
	if r := d.run(refused...); r.Code == 0 {
		t.Fatalf("a refused call succeeded\n%s", r)
	}
	again := d.run(refused...)
	if again.Code == 0 || strings.Contains(again.Stderr, "update may not change") {
		t.Fatalf("the refused call retried under its key\n%s", again)
	}
	if n := len(srv.Requests("tools/call")); n != 2 {
		t.Fatalf("the retry did not reach the server: %d tools/call", n)
	}
	srv.On("tools/call", nil)
	r := d.run(refused...).Must(t, 0)
	tk := d.getJSON(clitest.OnlyID(t, r))
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
	id := clitest.OnlyID(t, d.run("call", "--url", srv.url, "sleep", "--args", `{"seconds":600}`).Must(t, 0))
	start := time.Now()
	w := d.run("watch", "--timeout", "1s").Must(t, 7)
	if took := time.Since(start); took > waitfor.Scale(10*time.Second) {
		t.Fatalf("watch --timeout 1s took %s", took)
	}
	last := strings.Split(strings.TrimRight(w.Stderr, "\n"), "\n")
	if l := last[len(last)-1]; !strings.Contains(l, "--timeout 1s ran out with 1 task still open") {
		t.Fatalf("last stderr line %q\n%s", l, w)
	}
	if tk := d.getJSON(id); tk.Status != "working" {
		t.Fatalf("after the timeout: %+v", tk)
	}
	clitest.OneErrorLine(t, d.run("watch", "--timeout", "-1s").Must(t, exitUsage), "--timeout must not be negative")
}

// TestInputAskedAgainSaysTheAnswerWasNotTaken: an --input answer that
// does not fit the request (here invalid) is refused before it is sent,
// in one line that names it and says how to answer; the call's record
// stays, waiting for input before its task starts.
func TestInputAskedAgainSaysTheAnswerWasNotTaken(t *testing.T) {
	t.Parallel()
	srv := startDemo(t, "127.0.0.1:0")
	d := newDeck(t)
	r := d.run("call", "--url", srv.url, "confirm_first", "--input", `confirm={"action":"accept","content":{}}`).Must(t, exitUsage)
	clitest.OneErrorLine(t, r, `"confirm"`, "required", "still waits for input", "taskdeck answer ")
	if n := srv.stats(t).ToolCalls["confirm_first"]; n != 1 {
		t.Fatalf("%d tools/call of confirm_first, want only the first: the refused answer is not sent", n)
	}
	if tasks := d.ls(); len(tasks) != 1 || tasks[0].Status != "input_required" || tasks[0].TaskID != "" {
		t.Fatalf("want the call kept, waiting for input before its task: %+v", tasks)
	}
}

// TestInputNotAskedForIsNamed: an --input key the server did not ask for
// is named, not silently dropped.
func TestInputNotAskedForIsNamed(t *testing.T) {
	t.Parallel()
	srv := startDemo(t, "127.0.0.1:0")
	d := newDeck(t)
	r := d.run("call", "--url", srv.url, "confirm_first", "--input", `confirn={"action":"accept","content":{"confirm":true}}`).Must(t, exitWaiting)
	clitest.OneErrorLine(t, r, "waits for input before it starts", "keys: confirm", "did not ask for --input confirn")
}
