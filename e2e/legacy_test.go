package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/internal/clitest"
	"github.com/taskdeck/taskdeck/internal/nodetest"
	"github.com/taskdeck/taskdeck/internal/testproc"
	"github.com/taskdeck/taskdeck/internal/waitfor"
)

// TestLegacyKilledMidTaskReattached: the real binary against the
// TypeScript SDK 1.x server (2025-11-25, streamable HTTP, its tasks
// outliving the client): `call --wait` SIGKILLed while its task runs
// leaves the handle on disk, and the next process re-attaches the task
// and fetches its result with tasks/result.
func TestLegacyKilledMidTaskReattached(t *testing.T) {
	t.Parallel()
	url, _ := nodetest.LegacyServers(t).ServeSDK(t, "0")
	d := newDeck(t)
	tasks := d.callKilledWhileWorking("--url", url, "wait", "--args", `{"ms":4000}`)
	if len(tasks) != 1 || tasks[0].TaskID == "" || tasks[0].Status != "working" || string(tasks[0].raw["protocol"]) != `"2025-11-25"` {
		t.Fatalf("after SIGKILL, ls --json: %+v", tasks)
	}
	w := d.run("watch").Must(t, 0)
	clitest.MustContain(t, w, w.Stdout, tasks[0].ID, " completed ", "waited")
	if tk := d.getJSON(tasks[0].ID); tk.Status != "completed" || tk.resultText() != "waited" || tk.TaskID != tasks[0].TaskID {
		t.Fatalf("after watch: %+v", tk)
	}
}

// TestLegacyLostHandleAdoptedAndFound: the real binary against the
// TypeScript SDK 1.x server. A call SIGKILLed between the server's
// CreateTaskResult and the commit of its handle is orphaned, then
// resolved by `reconcile` with the one task the server lists in its
// window, and polled to its result. Tasks another client made show as
// found: one adopted (watched to its result, the history naming the
// adoption), one left (never offered again).
func TestLegacyLostHandleAdoptedAndFound(t *testing.T) {
	t.Parallel()
	url, _ := nodetest.LegacyServers(t).ServeSDK(t, "0")
	proxy := newHoldingProxy(t, url, false)
	d := newDeck(t)
	p := d.start("call", "--url", proxy.url(), "wait", "--args", `{"ms":2000}`)
	select {
	case <-proxy.received:
	case <-p.done:
		t.Fatalf("call ended before its tools/call arrived: exit %d\n%s\n%s", p.Code, p.Stdout, p.Stderr)
	}
	p.kill()
	tasks := d.ls()
	if len(tasks) != 1 || tasks[0].Status != "orphaned" || tasks[0].TaskID != "" {
		t.Fatalf("after SIGKILL between CreateTaskResult and the commit, ls --json: %+v", tasks)
	}
	orphan := tasks[0].ID
	r := d.run("reconcile").Must(t, 0)
	clitest.MustContain(t, r, r.Stdout, "orphan "+orphan+" resolved")
	if tk := d.waitStatus(orphan, "completed"); tk.resultText() != "waited" || !strings.Contains(string(tk.raw["history"]), "adopted: the server lists a task") {
		t.Fatalf("the adopted orphan: %+v", tk)
	}

	// Another client of the same server (another user's taskdeck) makes
	// two tasks; this deck has a task open there (mine), so it lists them.
	proxy.pass.Store(true)
	other := newDeck(t)
	mine := d.getJSON(clitest.OnlyID(t, d.run("call", "--url", proxy.url(), "wait", "--args", `{"ms":60000}`).Must(t, 0))).TaskID
	a := other.getJSON(clitest.OnlyID(t, other.run("call", "--url", url, "wait", "--args", `{"ms":1500}`).Must(t, 0))).TaskID
	b := other.getJSON(clitest.OnlyID(t, other.run("call", "--url", url, "wait", "--args", `{"ms":60000}`).Must(t, 0))).TaskID
	r = d.run("reconcile").Must(t, 0)
	line := regexp.MustCompile(`(?m)^found (\S+) .* task (\S+): the server lists this task `)
	found := map[string]string{} // server task id → record id
	for _, m := range line.FindAllStringSubmatch(r.Stdout, -1) {
		found[m[2]] = m[1]
	}
	if len(found) != 2 || found[a] == "" || found[b] == "" {
		t.Fatalf("reconcile found %v; want the other client's tasks %s and %s, not this deck's %s:\n%s", found, a, b, mine, r.Stdout)
	}
	ls := d.lsByID()
	if ls[found[a]].Status != "found" || ls[found[b]].Status != "found" {
		t.Fatalf("ls --json does not show the found rows: %+v", ls)
	}
	// Adopted: watched to its result. Left: not offered again.
	ad := d.run("adopt", found[a]).Must(t, 0)
	clitest.MustContain(t, ad, ad.Stdout, found[a])
	if tk := d.waitStatus(found[a], "completed"); tk.resultText() != "waited" || !strings.Contains(string(tk.raw["history"]), "adopted: taskdeck watches") {
		t.Fatalf("the adopted found task: %+v", tk)
	}
	lv := d.run("leave", found[b]).Must(t, 0)
	clitest.MustContain(t, lv, lv.Stdout, "left task "+found[b])
	if again := d.run("reconcile").Must(t, 0); strings.Contains(again.Stdout, "found ") {
		t.Fatalf("a second reconcile found again:\n%s", again.Stdout)
	}
	if bad := d.run("adopt", found[b]); bad.Code == 0 || !strings.Contains(bad.Stderr, "only a found task") {
		t.Fatalf("adopting a left task: exit %d\n%s", bad.Code, bad.Stderr)
	}
}

// TestLegacyCommandLineAnswerAndCancel: the real binary against
// server-everything 2026.8.31 over streamable HTTP, through `serve` (the
// server keeps its tasks per session: the owner's session carries them
// from one command to the next). call → the server's elicitation/create
// on the record (get) → answer → the result; another call → cancel →
// cancelled.
func TestLegacyCommandLineAnswerAndCancel(t *testing.T) {
	t.Parallel()
	url, _ := nodetest.LegacyServers(t).ServeEverything(t, "0")
	d := newDeck(t)
	d.serve()
	id := clitest.OnlyID(t, d.run("call", "--url", url, "simulate-research-query", "--args", `{"topic":"python","ambiguous":true}`).Must(t, 0))
	tk := d.waitStatus(id, "input_required")
	if len(tk.InputRequests) != 1 || string(tk.raw["protocol"]) != `"2025-11-25"` {
		t.Fatalf("the question on the record: %+v", tk)
	}
	for key, req := range tk.InputRequests {
		if !strings.Contains(string(req), "elicitation/create") || !strings.Contains(string(req), "Python snake species") {
			t.Fatalf("question %s: %s", key, req)
		}
		d.run("answer", id, key, `{"action":"accept","content":{"interpretation":"snake"}}`).Must(t, 0)
	}
	if tk = d.waitStatus(id, "completed"); !strings.Contains(tk.resultText(), "Clarification**: snake") {
		t.Fatalf("completed with %.300s; want the answer in the report", tk.resultText())
	}

	other := clitest.OnlyID(t, d.run("call", "--url", url, "simulate-research-query", "--args", `{"topic":"tides"}`).Must(t, 0))
	c := d.run("cancel", other).Must(t, 0)
	clitest.MustContain(t, c, c.Stdout, other)
	d.waitStatus(other, "cancelled")
}

// legacyRow is the status of the only row of server-everything's
// research tool, whose name the table may cut.
func legacyRow(s string) string {
	var st []string
	for _, r := range tableRows(s) {
		if strings.HasPrefix(r.tool, "simulate-") {
			st = append(st, r.status)
		}
	}
	if len(st) != 1 {
		return ""
	}
	return st[0]
}

// TestTUILegacyAnswerAndCancel: the dashboard (real binary, in tmux)
// against server-everything 2026.8.31 over streamable HTTP: the server's
// elicitation/create for its task shows as the row's input, answered in
// the form (the answer goes back as the request's reply, the result says
// so); a second task cancelled from the dashboard ends cancelled.
func TestTUILegacyAnswerAndCancel(t *testing.T) {
	t.Parallel()
	url, _ := nodetest.LegacyServers(t).ServeEverything(t, "0")
	d := newDeck(t)
	d.writeConfig(fmt.Sprintf(`{"mcpServers":{"ev":{"url":%q}}}`, url))
	tm := d.dashboard(120, 30)
	tm.waitText("0/0")
	id := clitest.OnlyID(t, d.run("call", "--server", "ev", "simulate-research-query", "--args", `{"topic":"python","ambiguous":true}`).Must(t, 0))
	tm.waitScreen("the research row waiting for input", func(s string) bool { return legacyRow(s) == "input_required" })
	tm.keys("a")
	tm.waitText("Clarification", "Python snake species")
	tm.keys("Enter")
	tm.waitText("answered: task " + id)
	tm.waitScreen("the research row completed", func(s string) bool { return legacyRow(s) == "completed" })

	other := clitest.OnlyID(t, d.run("call", "--server", "ev", "simulate-research-query", "--args", `{"topic":"tides"}`).Must(t, 0))
	tm.waitScreen("the new row working", func(s string) bool {
		n := 0
		for _, r := range tableRows(s) {
			if r.status == "working" {
				n++
			}
		}
		return n == 1
	})
	tm.keys("Up", "Up") // the newest row is first
	tm.keys("c")
	tm.waitText("Cancel 1 task on the server?", other)
	tm.keys("y")
	tm.waitScreen("the cancelled row", func(s string) bool {
		for _, r := range tableRows(s) {
			if r.status == "cancelled" {
				return true
			}
		}
		return false
	})
	tm.quit()
	if tk := d.getJSON(id); tk.Status != "completed" || !strings.Contains(tk.resultText(), "Clarification**: programming") || len(tk.AnsweredKeys) != 1 {
		t.Fatalf("the answered task: %s %q answered %v", tk.Status, tk.resultText(), tk.AnsweredKeys)
	}
	if tk := d.getJSON(other); tk.Status != "cancelled" {
		t.Fatalf("the cancelled task: %+v", tk)
	}
}

// legacyAgentLine is one outcome proxy/testdata/agent/legacy.mjs printed.
type legacyAgentLine struct {
	Fail     string   `json:"fail"`
	Session  *string  `json:"session"`
	Tool     string   `json:"tool"`
	TaskID   string   `json:"taskId"`
	Status   string   `json:"status"`
	Text     string   `json:"text"`
	Retry    string   `json:"retry"`
	Listed   []string `json:"listed"`
	Statuses []string `json:"statuses"`
}

// legacyAgent is legacy.mjs running: the lines it prints, in order.
type legacyAgent struct {
	lines chan legacyAgentLine
	done  chan struct{} // closed when it has exited; then err is its exit
	err   error
}

// startLegacyAgent runs legacy.mjs (the official TypeScript client pinned
// to 2025-11-25 with ext-tasks 0.2.2's generation-1 requester) with env
// added to its environment; it is killed by its pid when the test ends.
func startLegacyAgent(t *testing.T, env []string, args ...string) *legacyAgent {
	t.Helper()
	dir := nodetest.Install(t, filepath.Join("..", "proxy", "testdata", "agent"), "legacy.mjs")
	cmd, stdout, stderr := startNodeScript(t, dir, env, append([]string{"legacy.mjs"}, args...)...)
	a := &legacyAgent{lines: make(chan legacyAgentLine, 1000), done: make(chan struct{})}
	go func() {
		for sc := bufio.NewScanner(stdout); sc.Scan(); {
			var l legacyAgentLine
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				l.Fail = fmt.Sprintf("the agent printed %q: %v", sc.Text(), err)
			}
			a.lines <- l
		}
		if err := cmd.Wait(); err != nil {
			a.err = fmt.Errorf("%w: %s", err, stderr.String())
		}
		close(a.lines)
		close(a.done)
	}()
	t.Cleanup(func() { _ = testproc.Signal(cmd, syscall.SIGKILL); <-a.done })
	return a
}

// next is the agent's next line but a retry (logged), within the scaled
// wait; a failure it printed fails the test.
func (a *legacyAgent) next(t *testing.T, what string) legacyAgentLine {
	t.Helper()
	deadline := time.After(clitest.WaitTimeout)
	for {
		select {
		case l, ok := <-a.lines:
			switch {
			case !ok:
				<-a.done
				t.Fatalf("waiting for %s, the agent ended: %v", what, a.err)
			case l.Fail != "":
				t.Fatalf("waiting for %s, the agent failed: %s", what, l.Fail)
			case l.Retry != "":
				t.Logf("the agent tries again: %s", l.Retry)
				continue
			}
			return l
		case <-deadline:
			t.Fatalf("the agent printed no %s within %s", what, clitest.WaitTimeout)
		}
	}
}

// legacyAgentRestart is a deck whose `serve --proxy` fronts the demo
// server for agent e2e, and the legacy agent following a task of tool
// there ("outlive" in legacy.mjs), which it has created.
type legacyAgentRestart struct {
	d       *deck
	owner   *proc
	addr    string
	agent   *legacyAgent
	session string
	taskID  string // the agent's
	id      string // the record's
}

func startLegacyOutlive(t *testing.T, tool, args, want string) *legacyAgentRestart {
	t.Helper()
	srv := startDemo(t, "127.0.0.1:0")
	d := newDeck(t)
	d.writeConfig(fmt.Sprintf(`{"mcpServers":{"build":{"url":%q}},"agents":{"e2e":{"token":"${E2E_AGENT_TOKEN}","servers":["build"]}}}`, srv.url))
	const token = "e2e-agent-token-0123456789abcdef"
	d.env = append(d.env, "E2E_AGENT_TOKEN="+token)
	owner, base := d.serveProxy()
	r := &legacyAgentRestart{d: d, owner: owner, addr: strings.TrimPrefix(base, "http://")}
	r.agent = startLegacyAgent(t, []string{"TASKDECK_AGENT_TOKEN=" + token}, base+"/mcp/build", "outlive", tool, args, want)
	if l := r.agent.next(t, "its session"); l.Session == nil || *l.Session == "" {
		t.Fatalf("the agent's first line %+v: want its session", l)
	} else {
		r.session = *l.Session
	}
	created := r.agent.next(t, "its task")
	if created.Status != "created" || created.TaskID == "" {
		t.Fatalf("the agent's call: %+v, want a task", created)
	}
	r.taskID = created.TaskID
	r.id, _, _ = strings.Cut(created.TaskID, ".")
	return r
}

// restart SIGKILLs `serve --proxy` (by its pid's group) and starts it
// again on the same address, as the agent knows it.
func (r *legacyAgentRestart) restart(t *testing.T) {
	t.Helper()
	r.owner.kill()
	r.owner, _ = r.d.serveProxyAt(r.addr)
}

// finish checks that the agent got want as the result of the task it
// created, on the session it opened before the restart, and that its
// tasks/list, rebuilt from the store, names the task.
func (r *legacyAgentRestart) finish(t *testing.T, want string) {
	t.Helper()
	got := r.agent.next(t, "its result")
	if got.TaskID != r.taskID || got.Status != "completed" || !strings.Contains(got.Text, want) || got.Session == nil || *got.Session != r.session {
		t.Fatalf("the agent ended with %+v; want task %s completed with %q on session %s", got, r.taskID, want, r.session)
	}
	listed := r.agent.next(t, "its tasks/list")
	if !slices.Equal(listed.Listed, []string{r.taskID}) || !slices.Equal(listed.Statuses, []string{"completed"}) {
		t.Fatalf("tasks/list after the restart gave %q %q, want the task %s completed", listed.Listed, listed.Statuses, r.taskID)
	}
	if <-r.agent.done; r.agent.err != nil {
		t.Fatalf("the agent: %v", r.agent.err)
	}
	if tk := r.d.getJSON(r.id); tk.Status != "completed" || string(tk.raw["agent"]) != `"ts-legacy-agent"` {
		t.Fatalf("the record: %s, agent %s; want completed, of ts-legacy-agent", tk.Status, tk.raw["agent"])
	}
}

// TestLegacyAgentOutlivesRestart: the ext-tasks 0.2.2 generation-1
// requester, on the official TypeScript client pinned to 2025-11-25,
// calls the demo's sleep through the real binary's `serve --proxy`;
// taskdeck is SIGKILLed while the task works and restarted on the same
// address; the requester, keeping its session id, polls on and gets the
// result of the same task: its session and its tasks/list outlive the
// process.
func TestLegacyAgentOutlivesRestart(t *testing.T) {
	t.Parallel()
	// Long enough to outlast a restart on a loaded machine.
	seconds := int(waitfor.Scale(10*time.Second).Seconds() / 0.05)
	r := startLegacyOutlive(t, "sleep", fmt.Sprintf(`{"seconds":%d}`, seconds), "slept")
	r.d.waitStatus(r.id, "working")
	r.restart(t)
	if tk := r.d.getJSON(r.id); tk.Status != "working" {
		t.Fatalf("after the restart the task is %s; it must still work for the test to show a re-attach", tk.Status)
	}
	r.finish(t, "slept")
}

// TestLegacyAgentAnsweredFromCommandLine: the same requester calls the
// demo's approve, whose task asks for input; the agent declares no
// elicitation, so the question is the operator's. taskdeck is SIGKILLed
// and restarted while the task waits, the operator answers with
// `taskdeck answer`, and the requester, polling on its session, gets the
// result that answer made.
func TestLegacyAgentAnsweredFromCommandLine(t *testing.T) {
	t.Parallel()
	const want = "approved ship: from the shell"
	r := startLegacyOutlive(t, "approve", `{"action":"ship"}`, want)
	tk := r.d.waitStatus(r.id, "input_required")
	r.restart(t)
	if len(tk.InputRequests) != 1 {
		t.Fatalf("the task asks %d questions, want 1: %+v", len(tk.InputRequests), tk)
	}
	for key := range tk.InputRequests {
		r.d.run("answer", r.id, key, `{"action":"accept","content":{"approve":true,"reason":"from the shell"}}`).Must(t, exitOK)
	}
	r.finish(t, want)
}

// TestStdioLegacyAgentFlows: the same requester launches the real
// binary's `taskdeck proxy --stdio build` and speaks 2025-11-25 to it over
// stdio: call → task → poll → result, a failure, a cancel, and its tasks
// in tasks/list, newest first; every one a record of the agent's.
func TestStdioLegacyAgentFlows(t *testing.T) {
	t.Parallel()
	srv := startDemo(t, "127.0.0.1:0")
	d := newDeck(t)
	d.writeConfig(fmt.Sprintf(`{"mcpServers":{"build":{"url":%q}}}`, srv.url))
	env := map[string]string{}
	for _, kv := range d.env {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	launch, err := json.Marshal(map[string]any{"command": tdBin, "args": d.args([]string{"proxy", "--stdio", "build"}), "env": env})
	if err != nil {
		t.Fatal(err)
	}
	agent := startLegacyAgent(t, []string{"TASKDECK_STDIO=" + string(launch)}, "stdio", "flows")
	agent.next(t, "its session")
	var told, ids []string
	for _, want := range []string{"echo completed hello", "sleep completed slept", "fail failed simulated failure", "sleep cancelled"} {
		l := agent.next(t, want)
		told = append(told, strings.TrimSpace(strings.Join([]string{l.Tool, l.Status, l.Text}, " ")))
		if !strings.HasPrefix(told[len(told)-1], want) {
			t.Fatalf("the agent was told %q, want %q", told[len(told)-1], want)
		}
		ids = append(ids, l.TaskID)
	}
	listed := agent.next(t, "its tasks/list")
	slices.Reverse(ids)
	if !slices.Equal(listed.Listed, ids) {
		t.Fatalf("tasks/list gave %q, want the agent's tasks, newest first: %q", listed.Listed, ids)
	}
	for _, id := range ids {
		rid, _, _ := strings.Cut(id, ".")
		if tk := d.getJSON(rid); string(tk.raw["agent"]) != `"ts-legacy-agent"` {
			t.Errorf("record %s: agent %s, want ts-legacy-agent", rid, tk.raw["agent"])
		}
	}
}

// TestTUILegacyAgentAnsweredFromDashboard: as
// TestLegacyAgentAnsweredFromCommandLine, the operator answering the
// requester's approve in the dashboard (real binary, in tmux) after the
// restart; the requester gets the result that answer made.
func TestTUILegacyAgentAnsweredFromDashboard(t *testing.T) {
	t.Parallel()
	const want = "approved ship: from the dashboard"
	r := startLegacyOutlive(t, "approve", `{"action":"ship"}`, want)
	r.d.waitStatus(r.id, "input_required")
	r.restart(t)
	tm := r.d.dashboard(120, 30)
	tm.waitScreen("the approve row waiting for input", func(s string) bool { return oneRow(s, "approve") == "input_required" })
	tm.keys("a")
	tm.waitText("Approve ship?", "Reason *")
	tm.keys("y")
	tm.waitText("┃ Reason *")
	tm.typeText("from the dashboard")
	tm.waitText("> from the dashboard")
	tm.keys("Enter")
	tm.waitText("answered: task " + r.id)
	r.finish(t, want)
	tm.quit()
}
