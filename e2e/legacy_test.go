package e2e

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/taskdeck/taskdeck/internal/clitest"
	"github.com/taskdeck/taskdeck/internal/nodetest"
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
