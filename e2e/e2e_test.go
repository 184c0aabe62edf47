package e2e

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/taskdeck/taskdeck/internal/clitest"
)

const approveAnswer = `{"action":"accept","content":{"approve":true,"reason":"ok"}}`

// TestHTTPFullCycle drives every kind of task through the CLI over
// streamable HTTP.
func TestHTTPFullCycle(t *testing.T) {
	t.Parallel()
	srv := startDemo(t, "127.0.0.1:0")
	d := newDeck(t)

	t.Run("sleep --wait", func(t *testing.T) {
		r := d.run("call", "--url", srv.url, "sleep", "--args", `{"seconds":2}`, "--wait").Must(t, 0)
		clitest.MustContain(t, r, r.Stdout, " working ", " completed ", "slept 2 s")
		if strings.Index(r.Stdout, " working ") > strings.Index(r.Stdout, " completed ") {
			t.Fatalf("status changes out of order\n%s", r)
		}
		if r.Stderr != "" {
			t.Fatalf("stderr should be empty\n%s", r)
		}
	})

	t.Run("echo is completed directly, no task", func(t *testing.T) {
		before := srv.stats(t)
		r := d.run("call", "--url", srv.url, "echo", "--args", `{"text":"hello there"}`).Must(t, 0)
		id := clitest.OnlyID(t, r)
		after := srv.stats(t)
		if after.TasksCreated != before.TasksCreated || after.ToolCalls["echo"] != before.ToolCalls["echo"]+1 {
			t.Fatalf("echo: stats before %+v after %+v", before, after)
		}
		tk := d.getJSON(id)
		if tk.Status != "completed" || tk.TaskID != "" || tk.resultText() != "hello there" || tk.IsError {
			t.Fatalf("echo record: %+v", tk)
		}
		if g := srv.stats(t).Gets; g != after.Gets {
			t.Fatalf("get of a completed record polled the server (%d → %d gets)", after.Gets, g)
		}
	})

	t.Run("approve, answer, watch", func(t *testing.T) {
		r := d.run("call", "--url", srv.url, "approve", "--args", `{"action":"deploy"}`).Must(t, 0)
		id := clitest.OnlyID(t, r)
		d.waitStatus(id, "input_required")
		g := d.run("get", id[:10]).Must(t, 0) // a unique prefix names the task
		clitest.MustContain(t, g, g.Stdout, "id:            "+id, "input_required", "approve-1", "Approve deploy?",
			"taskdeck answer "+id+" approve-1 ", "approve (boolean, required)", "reason (string, required)")

		a := d.run("answer", id, "approve-1", approveAnswer).Must(t, 0)
		clitest.MustContain(t, a, a.Stdout, "answered approve-1 of task "+id)

		w := d.run("watch").Must(t, 0)
		clitest.MustContain(t, w, w.Stdout, "reconciled:", id, "completed", "approved deploy: ok")
		tk := d.getJSON(id)
		if tk.Status != "completed" || !strings.HasPrefix(tk.resultText(), "approved ") || tk.IsError {
			t.Fatalf("approve record: %+v\n", tk)
		}
		if len(tk.AnsweredKeys) != 1 || tk.AnsweredKeys[0] != "approve-1" {
			t.Fatalf("answeredKeys = %v", tk.AnsweredKeys)
		}
		// An input is answered once: a second answer is refused (usage).
		again := d.run("answer", id, "approve-1", approveAnswer).Must(t, exitUsage)
		clitest.OneErrorLine(t, again, id)
		if n := srv.stats(t).Updates; n != 1 {
			t.Fatalf("server saw %d tasks/update, want 1", n)
		}
	})

	t.Run("cancel", func(t *testing.T) {
		r := d.run("call", "--url", srv.url, "sleep", "--args", `{"seconds":600}`).Must(t, 0)
		id := clitest.OnlyID(t, r)
		c := d.run("cancel", id).Must(t, 0)
		clitest.MustContain(t, c, c.Stdout, "cancel sent", id)
		d.run("watch").Must(t, 0)
		tk := d.getJSON(id)
		if tk.Status != "cancelled" {
			t.Fatalf("after cancel and watch: %+v", tk)
		}
		g := d.run("get", id).Must(t, 0)
		clitest.MustContain(t, g, g.Stdout, "cancelled")
		if srv.stats(t).Cancels != 1 {
			t.Fatalf("server saw %d tasks/cancel, want 1", srv.stats(t).Cancels)
		}
		// Cancelling what has ended is refused.
		again := d.run("cancel", id).Must(t, exitUsage)
		clitest.OneErrorLine(t, again, "already ended")
	})

	t.Run("fail error", func(t *testing.T) {
		r := d.run("call", "--url", srv.url, "fail", "--args", `{"mode":"error"}`, "--wait").Must(t, exitTaskBad)
		clitest.MustContain(t, r, r.Stdout, " failed ", "simulated failure")
		clitest.OneErrorLine(t, r, "ended failed")
	})

	t.Run("fail tool", func(t *testing.T) {
		r := d.run("call", "--url", srv.url, "fail", "--args", `{"mode":"tool"}`, "--wait").Must(t, exitTaskBad)
		clitest.MustContain(t, r, r.Stdout, " completed ", "tool error", "simulated tool failure")
		clitest.OneErrorLine(t, r, "tool error")
		id := strings.Fields(strings.Split(r.Stdout, "\n")[0])[1]
		tk := d.getJSON(id)
		if tk.Status != "completed" || !tk.IsError {
			t.Fatalf("fail tool record: %+v", tk)
		}
	})

	t.Run("call --wait --input answers in-task input", func(t *testing.T) {
		before := srv.stats(t)
		r := d.run("call", "--url", srv.url, "approve", "--args", `{"action":"ship"}`, "--wait",
			"--input", "approve-1="+approveAnswer).Must(t, 0)
		clitest.MustContain(t, r, r.Stdout, "input_required", " completed ", "approved ship: ok")
		if n := srv.stats(t).Updates - before.Updates; n != 1 {
			t.Fatalf("server saw %d tasks/update, want 1", n)
		}
	})

	t.Run("call --wait without an answer stops at the input", func(t *testing.T) {
		r := d.run("call", "--url", srv.url, "approve", "--args", `{"action":"halt"}`, "--wait").Must(t, exitWaiting)
		clitest.MustContain(t, r, r.Stdout, "input_required", "approve-1")
		clitest.OneErrorLine(t, r, "waits for input", "taskdeck answer ")
	})

	t.Run("confirm_first answers input before the task exists", func(t *testing.T) {
		r := d.run("call", "--url", srv.url, "confirm_first", "--wait",
			"--input", `confirm={"action":"accept","content":{"confirm":true}}`).Must(t, 0)
		clitest.MustContain(t, r, r.Stdout, " completed ", "confirmed")
		// Without --input and without a terminal, the record stays,
		// answerable later.
		n := d.run("call", "--url", srv.url, "confirm_first").Must(t, exitWaiting)
		clitest.OneErrorLine(t, n, "waits for input before it starts", "keys: confirm", "taskdeck answer ")
	})

	t.Run("ls lists everything", func(t *testing.T) {
		tasks := d.ls()
		if len(tasks) != 10 {
			t.Fatalf("ls --json has %d tasks, want 10: %+v", len(tasks), tasks)
		}
		r := d.run("ls").Must(t, 0)
		clitest.MustContain(t, r, r.Stdout, "ID", "STATUS", "sleep", "approve", "echo", "cancelled", "(tool error)")
	})
}

// TestStdio runs the demo server as a stdio child configured by name.
func TestStdio(t *testing.T) {
	t.Parallel()
	d := newDeck(t)
	cfg, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{
		"demo": map[string]any{"command": tdBin, "args": []string{"demo-server", "--stdio", "--speed", demoSpeed}},
	}})
	d.writeConfig(string(cfg))

	r := d.run("servers").Must(t, 0)
	clitest.MustContain(t, r, r.Stdout, "demo", "demo-server --stdio")

	r = d.run("call", "--server", "demo", "sleep", "--args", `{"seconds":2}`, "--wait").Must(t, 0)
	clitest.MustContain(t, r, r.Stdout, " working ", " completed ", "slept 2 s")

	r = d.run("call", "--server", "demo", "approve", "--args", `{"action":"stdio"}`, "--wait",
		"--input", "approve-1="+approveAnswer).Must(t, 0)
	clitest.MustContain(t, r, r.Stdout, "input_required", " completed ", "approved stdio: ok")

	// The stdio server dies with the process that spawned it, and its
	// open tasks with it: the next process finds them unknown, and says so.
	r = d.run("call", "--server", "demo", "sleep", "--args", `{"seconds":600}`).Must(t, 0)
	id := clitest.OnlyID(t, r)
	tk := d.lsByID()[id]
	if tk.Status != "working" || tk.TaskID == "" || tk.Server != "demo" {
		t.Fatalf("stdio task after its process ended: %+v", tk)
	}
	g := d.run("get", id).Must(t, 0)
	clitest.MustContain(t, g, g.Stdout, "unknown", "no longer knows")
	if tk := d.getJSON(id); tk.Status != "unknown" {
		t.Fatalf("status %q, want unknown", tk.Status)
	}
	w := d.run("watch").Must(t, 0)
	clitest.MustContain(t, w, w.Stdout, "0 re-attached")
}

// TestIdempotencyKey: one key launches one tools/call.
func TestIdempotencyKey(t *testing.T) {
	t.Parallel()
	srv := startDemo(t, "127.0.0.1:0")
	d := newDeck(t)
	args := []string{"call", "--url", srv.url, "sleep", "--args", `{"seconds":600}`, "--key", "nightly-build"}
	first := d.run(args...).Must(t, 0)
	id := clitest.OnlyID(t, first)
	second := d.run(args...).Must(t, 0)
	if got := clitest.OnlyID(t, second); got != id {
		t.Fatalf("same key printed %s then %s", id, got)
	}
	clitest.MustContain(t, second, second.Stderr, "nightly-build", id, "nothing new was sent")
	st := srv.stats(t)
	if st.ToolCalls["sleep"] != 1 || st.TasksCreated != 1 {
		t.Fatalf("same key twice: server stats %+v, want one sleep call and one task", st)
	}

	other := d.run("call", "--url", srv.url, "sleep", "--args", `{"seconds":5}`, "--key", "nightly-build").Must(t, exitUsage)
	clitest.OneErrorLine(t, other, "nightly-build", id, "other arguments")
	if st := srv.stats(t); st.ToolCalls["sleep"] != 1 || st.TasksCreated != 1 {
		t.Fatalf("conflicting key reached the server: %+v", st)
	}
	if tasks := d.ls(); len(tasks) != 1 || tasks[0].Key != "nightly-build" {
		t.Fatalf("ls after key reuse: %+v", tasks)
	}
}

// TestServerRestart: a server that lost its tasks makes them unknown,
// and unknown tasks are not polled again.
func TestServerRestart(t *testing.T) {
	t.Parallel()
	srv := startDemo(t, "127.0.0.1:0")
	d := newDeck(t)
	id := clitest.OnlyID(t, d.run("call", "--url", srv.url, "sleep", "--args", `{"seconds":600}`).Must(t, 0))

	srv.p.kill()
	srv2 := startDemo(t, srv.addr)
	if srv2.url != srv.url {
		t.Fatalf("restarted server on %s, want %s", srv2.url, srv.url)
	}
	tk := d.getJSON(id)
	if tk.Status != "unknown" {
		t.Fatalf("after the server restarted: %+v", tk)
	}
	gets := srv2.stats(t).Gets
	w := d.run("watch").Must(t, 0)
	clitest.MustContain(t, w, w.Stdout, "0 re-attached", "0 unreachable")
	if n := srv2.stats(t).Gets; n != gets {
		t.Fatalf("watch polled an unknown task (%d → %d tasks/get)", gets, n)
	}
	if tk := d.getJSON(id); tk.Status != "unknown" {
		t.Fatalf("status %q, want unknown", tk.Status)
	}
}

// TestJSONShape checks the --json fields scripts rely on.
func TestJSONShape(t *testing.T) {
	t.Parallel()
	srv := startDemo(t, "127.0.0.1:0")
	d := newDeck(t)

	common := []string{"id", "server", "tool", "status", "createdAt", "updatedAt"}
	check := func(tk task, want ...string) {
		t.Helper()
		for _, f := range append(common, want...) {
			if _, ok := tk.raw[f]; !ok {
				t.Errorf("task %s (%s, %s) lacks %q: %v", tk.ID, tk.Tool, tk.Status, f, tk.raw)
			}
		}
		if tk.CreatedAt.IsZero() || tk.UpdatedAt.Before(tk.CreatedAt) || tk.Server != srv.url {
			t.Errorf("task %s: createdAt %v updatedAt %v server %q", tk.ID, tk.CreatedAt, tk.UpdatedAt, tk.Server)
		}
	}

	// call --json without --wait: the record with its handle.
	r := d.run("call", "--url", srv.url, "sleep", "--args", `{"seconds":1}`, "--json").Must(t, 0)
	sleep := parseTask(t, strings.TrimSpace(r.Stdout))
	check(sleep, "taskId")
	// call --wait --json: one object per change, the last completed.
	r = d.run("call", "--url", srv.url, "sleep", "--args", `{"seconds":2}`, "--wait", "--json").Must(t, 0)
	lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
	last := parseTask(t, lines[len(lines)-1])
	for _, l := range lines {
		check(parseTask(t, l), "taskId")
	}
	check(last, "taskId", "statusMessage", "result")
	if last.Status != "completed" || last.resultText() != "slept 2 s" {
		t.Fatalf("last line of call --wait --json: %+v", last)
	}

	approve := clitest.OnlyID(t, d.run("call", "--url", srv.url, "approve", "--args", `{"action":"json"}`).Must(t, 0))
	tk := d.waitStatus(approve, "input_required")
	check(tk, "taskId", "inputRequests")
	var req struct {
		Method string `json:"method"`
		Params struct {
			Message         string          `json:"message"`
			RequestedSchema json.RawMessage `json:"requestedSchema"`
		} `json:"params"`
	}
	if err := json.Unmarshal(tk.InputRequests["approve-1"], &req); err != nil || req.Method != "elicitation/create" ||
		!strings.Contains(string(req.Params.RequestedSchema), "approve") {
		t.Fatalf("inputRequests: %s (%v)", tk.raw["inputRequests"], err)
	}

	r = d.run("call", "--url", srv.url, "fail", "--args", `{"mode":"error"}`, "--wait").Must(t, exitTaskBad)
	failed := parseTask(t, strings.TrimSpace(d.run("get", strings.Fields(r.Stdout)[1], "--json").Must(t, 0).Stdout))
	check(failed, "taskId", "error")
	if failed.Error == nil || failed.Error.Message != "simulated failure" {
		t.Fatalf("failed task error: %+v", failed.Error)
	}

	echo := clitest.OnlyID(t, d.run("call", "--url", srv.url, "echo", "--args", `{"text":"x"}`).Must(t, 0))
	check(d.getJSON(echo), "result")

	// ls --json: exactly one JSON object per line, one line per task.
	ls := d.run("ls", "--json").Must(t, 0)
	lines = strings.Split(strings.TrimRight(ls.Stdout, "\n"), "\n")
	if len(lines) != 5 {
		t.Fatalf("ls --json: %d lines, want 5\n%s", len(lines), ls)
	}
	seen := map[string]bool{}
	for _, l := range lines {
		var obj map[string]any
		if err := json.Unmarshal([]byte(l), &obj); err != nil {
			t.Fatalf("ls --json line is not one JSON object: %v\n%s", err, l)
		}
		tk := parseTask(t, l)
		check(tk)
		seen[tk.ID] = true
	}
	for _, id := range []string{sleep.ID, last.ID, approve, failed.ID, echo} {
		if !seen[id] {
			t.Errorf("ls --json lacks %s", id)
		}
	}
	// --status filters.
	if out := d.run("ls", "--json", "--status", "failed").Must(t, 0).Stdout; strings.Count(out, "\n") != 1 || !strings.Contains(out, failed.ID) {
		t.Fatalf("ls --status failed:\n%s", out)
	}
}

// The server list comes from a file anyone may have handed the user: what
// it prints has its escapes and controls stripped, as server text does.
func TestServersListIsSanitized(t *testing.T) {
	t.Parallel()
	d := newDeck(t)
	cfg, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{
		"evil\x1b[2J": map[string]any{"command": "tool", "args": []string{"\x1b]0;pwned\x07", "--flag"}},
	}})
	d.writeConfig(string(cfg))
	r := d.run("servers").Must(t, 0)
	clitest.MustContain(t, r, r.Stdout, "evil", "tool", "--flag")
	if strings.ContainsAny(r.Stdout, "\x1b\x07") {
		t.Fatalf("servers printed escapes: %q", r.Stdout)
	}
}
