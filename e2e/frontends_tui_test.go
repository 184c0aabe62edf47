package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/internal/clitest"
	"github.com/taskdeck/taskdeck/internal/waitfor"
)

// feedBound is how soon after a commit the dashboard shows it: the issue
// asks for 200 ms; the race detector slows this test process (the tmux
// captures it runs) several times over.
func feedBound() time.Duration {
	if raceEnabled {
		return waitfor.Scale(500 * time.Millisecond)
	}
	return waitfor.Scale(200 * time.Millisecond)
}

// timeTo polls the screen every 20 ms until cond holds, and returns how
// long after from that screen was captured.
func (tm *tuiTerm) timeTo(what string, from time.Time, cond func(s string) bool) time.Duration {
	tm.t.Helper()
	var s string
	if !waitfor.Until(time.Until(from.Add(tuiTimeout)), 20*time.Millisecond, func() bool { s = tm.screen(); return cond(s) }) {
		tm.t.Fatalf("gave up after %s waiting for %s; screen:\n%s", tuiTimeout, what, s)
	}
	return time.Since(from)
}

// printed starts a command and returns its first line of output, the
// moment it was started and the moment it printed that line: a command
// prints after its commit, so the change committed in between.
func (d *deck) printed(args ...string) (line string, started, at time.Time) {
	d.t.Helper()
	started = time.Now()
	p := d.start(args...)
	// A fine step: the moment of the line is what is measured.
	printed := func() bool { return strings.Contains(p.Stdout.String(), "\n") }
	if !waitfor.Until(clitest.CmdTimeout, time.Millisecond, func() bool { return printed() || p.exited() }) {
		d.t.Fatalf("taskdeck %s printed nothing within %s", strings.Join(args, " "), clitest.CmdTimeout)
	}
	at = time.Now()
	if !printed() {
		d.t.Fatalf("taskdeck %s exited %d without output: %s", strings.Join(args, " "), p.Code, p.Stderr.String())
	}
	line, _, _ = strings.Cut(p.Stdout.String(), "\n")
	clitest.WaitFor(d.t, "the command to exit", p.exited)
	if p.Code != exitOK {
		d.t.Fatalf("taskdeck %s exited %d: %s", strings.Join(args, " "), p.Code, p.Stderr.String())
	}
	return line, started, at
}

// TestDashboardShowsAnotherShellsChanges: with the dashboard open (it
// owns the store), commands from another shell work through it: a new
// call's row, an answer and a cancel show on its screen within the feed
// bound of the commit, `call --wait` succeeds, and ls and get answer
// throughout (never exit 4).
func TestDashboardShowsAnotherShellsChanges(t *testing.T) {
	t.Parallel()
	d, srv := tuiDeck(t)
	tm := d.dashboard(120, 30)
	clitest.WaitFor(t, "the dashboard to own the store", func() bool {
		_, err := os.Lstat(filepath.Join(d.dataDir, "taskdeck.sock"))
		return err == nil
	})
	tm.waitText("STATUS", "TOOL")
	bound := feedBound()
	// check measures from the command's output (after the commit) to the
	// screen, and logs the time from the command's start too: a bound on
	// the other side that counts the command's own run.
	check := func(what string, started, at time.Time, cond func(s string) bool) {
		t.Helper()
		took := tm.timeTo(what, at, cond)
		t.Logf("%s: on screen %v after the command printed, %v after it started", what, took.Round(time.Millisecond), (took + at.Sub(started)).Round(time.Millisecond))
		if took > bound {
			t.Errorf("%s took %v to show on the dashboard, want within %v", what, took, bound)
		}
	}
	throughout := func(id string) {
		t.Helper()
		if n := len(d.ls()); n == 0 {
			t.Fatal("ls shows no records")
		}
		r := d.run("get", id).Must(t, exitOK)
		clitest.MustContain(t, r, r.Stdout, id)
	}

	// 600 demo seconds are 30 s here: the sleep is open all along.
	sleepID, started, at := d.printed("call", "--server", "demo", "sleep", "--args", `{"seconds":600}`)
	check("the new row", started, at, func(s string) bool { return oneRow(s, "sleep") != "" })
	throughout(sleepID)

	r := d.run("call", "--server", "demo", "echo", "--args", `{"text":"from another shell"}`, "--wait").Must(t, exitOK)
	clitest.MustContain(t, r, r.Stdout, "completed")
	tm.waitScreen("the echo row completed", func(s string) bool { return oneRow(s, "echo") == "completed" })

	approveID, _, _ := d.printed("call", "--server", "demo", "approve", "--args", `{"action":"deploy"}`)
	tm.waitScreen("the approve row waiting for input", func(s string) bool { return oneRow(s, "approve") == "input_required" })
	throughout(approveID)
	_, started, at = d.printed("answer", approveID, "approve-1", approveAnswer)
	check("the answer", started, at, func(s string) bool {
		st := oneRow(s, "approve")
		return st != "" && st != "input_required"
	})

	_, started, at = d.printed("cancel", sleepID)
	check("the cancel", started, at, func(s string) bool { return oneRow(s, "sleep") == "cancelled" })
	throughout(sleepID)

	tm.waitScreen("the approve row completed", func(s string) bool { return oneRow(s, "approve") == "completed" })
	if tk := d.getJSON(approveID); tk.Status != "completed" || tk.resultText() != "approved deploy: ok" {
		t.Fatalf("the approve task after the answer: %+v (result %q)", tk, tk.resultText())
	}
	if st := srv.stats(t); st.Updates != 1 || st.Cancels != 1 {
		t.Fatalf("the server saw %d tasks/update and %d tasks/cancel, want 1 each", st.Updates, st.Cancels)
	}
	tm.quit()
}
