package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/internal/clitest"
)

// TestWatchNotifyPiped: `watch --notify` with its output piped prints one
// line when a task starts waiting for input (its question, stripped of the
// server's escape sequences) and one when a task fails, and writes no bell
// and no notification escape: they are for a terminal only.
func TestWatchNotifyPiped(t *testing.T) {
	t.Parallel()
	srv := startDemo(t, "127.0.0.1:0")
	d := newDeck(t)
	d.writeConfig(fmt.Sprintf(`{"mcpServers":{"build":{"url":%q}}}`, srv.url))
	d.start("serve")
	w := d.start("watch", "--notify")

	approve := clitest.OnlyID(t, d.run("call", "--server", "build", "approve", "--args", `{"action":"deploy\u001b[31m"}`).Must(t, exitOK))
	failed := clitest.OnlyID(t, d.run("call", "--server", "build", "fail", "--args", `{"mode":"error"}`).Must(t, exitOK))
	clitest.WaitFor(t, "a line for each", func() bool {
		out := w.Stdout.String()
		return strings.Contains(out, "input needed  "+approve) && strings.Contains(out, "failed  "+failed) || w.exited()
	})
	out := w.Stdout.String()
	if !strings.Contains(out, "input needed  "+approve+"  build approve: Approve deploy") || !strings.Contains(out, "failed  "+failed+"  build fail: simulated failure") {
		t.Fatalf("watch --notify printed (exit %d):\n%s\n%s", w.Code, out, w.Stderr)
	}
	if strings.ContainsAny(out, "\x1b\a") {
		t.Fatalf("watch --notify wrote an escape or a bell to a pipe: %q", out)
	}
	if n := strings.Count(out, "\n"); n != 2 {
		t.Fatalf("watch --notify printed %d lines, want 2:\n%s", n, out)
	}
}

// TestWatchNotifyTerminal: in a terminal (a tmux pane) the same line comes
// with the bell and an OSC 9 desktop notification naming the tool.
func TestWatchNotifyTerminal(t *testing.T) {
	t.Parallel()
	srv := startDemo(t, "127.0.0.1:0")
	d := newDeck(t)
	d.writeConfig(fmt.Sprintf(`{"mcpServers":{"build":{"url":%q}}}`, srv.url))
	d.start("serve")
	tm := startTerm(t, 160, 10, tuiEnv(d.env), d.args([]string{"watch", "--notify"})...)

	id := clitest.OnlyID(t, d.run("call", "--server", "build", "approve", "--args", `{"action":"deploy"}`).Must(t, exitOK))
	tm.waitText("input needed  "+id, "build approve: Approve deploy?")
	// pipe-pane records a moment after the screen shows it.
	want := "Approve deploy?\a\x1b]9;taskdeck: approve input needed\a"
	clitest.WaitFor(t, "the bell and OSC 9 after the line", func() bool { return strings.Contains(tm.rawOutput(), want) })
}

// TestDashboardNotifyMeTerminal: W on a row of the dashboard, then the
// task completes: the bytes the terminal receives (tmux's pipe-pane) hold
// the bell and the OSC 9 desktop notification of that change.
func TestDashboardNotifyMeTerminal(t *testing.T) {
	t.Parallel()
	d, _ := tuiDeck(t)
	// 400 demo seconds are 20 s here: W is pressed well before it ends
	// (15 ended before a busy CI's dashboard had started).
	id := d.call("sleep", `{"seconds":400}`)
	tm := d.dashboard(160, 20)
	tm.waitText("working")
	tm.keys("W")
	tm.waitText("when its status changes")
	// The sleep's 20 s run from its call is still mostly to go.
	d.waitStatusAfter(id, "completed", 20*time.Second)
	want := "\a\x1b]9;taskdeck: sleep working → completed\a"
	clitest.WaitFor(t, "the bell and OSC 9 of the change", func() bool { return strings.Contains(tm.rawOutput(), want) })
}

// TestWatchNotifyDeadline (issue 27): a wait that runs past its
// configured deadline is a second line of `watch --notify`, once: the
// owner (serve) escalates it, and the feed carries the escalation.
func TestWatchNotifyDeadline(t *testing.T) {
	t.Parallel()
	srv := startDemo(t, "127.0.0.1:0")
	d := newDeck(t)
	d.writeConfig(fmt.Sprintf(`{"mcpServers":{"build":{"url":%q,"toolDeadlines":{"approve":"2s"}}}}`, srv.url))
	d.start("serve")
	w := d.start("watch", "--notify")

	id := clitest.OnlyID(t, d.run("call", "--server", "build", "approve", "--args", `{"action":"deploy"}`).Must(t, exitOK))
	clitest.WaitFor(t, "the deadline's line", func() bool {
		return strings.Contains(w.Stdout.String(), "deadline passed  "+id) || w.exited()
	})
	out := w.Stdout.String()
	if !strings.Contains(out, "input needed  "+id+"  build approve: Approve deploy?") || !strings.Contains(out, "deadline passed  "+id+"  build approve: Approve deploy?") {
		t.Fatalf("watch --notify printed (exit %d):\n%s\n%s", w.Code, out, w.Stderr)
	}
	if n := strings.Count(out, "\n"); n != 2 {
		t.Fatalf("watch --notify printed %d lines, want 2 (input needed, deadline passed):\n%s", n, out)
	}
}
