package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/internal/clitest"
)

// TestTUIViews drives the built dashboard in tmux, at 80×24 and 200×60,
// with and without NO_COLOR, through issue 14's views: the status
// groups, the inbox (2) and its form, a server that stopped answering
// (its row flagged, in the problems group, and unreachable in the
// header), clock times (t), and the short id that `get` takes.
func TestTUIViews(t *testing.T) {
	eachScreen(t, tuiViews)
}

// eachScreen runs a dashboard test at 80×24 and 200×60, with colour and
// with NO_COLOR, in parallel.
func eachScreen(t *testing.T, run func(t *testing.T, width, height int, noColor bool)) {
	for _, size := range [][2]int{{80, 24}, {200, 60}} {
		for _, noColor := range []bool{false, true} {
			name := fmt.Sprintf("%dx%d", size[0], size[1])
			if noColor {
				name += "/NO_COLOR"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				run(t, size[0], size[1], noColor)
			})
		}
	}
}

func tuiViews(t *testing.T, width, height int, noColor bool) {
	srv := startDemo(t, "127.0.0.1:0")
	flaky := startDemo(t, "127.0.0.1:0")
	d := newDeck(t)
	d.writeConfig(fmt.Sprintf(`{"mcpServers":{"demo":{"url":%q},"flaky":{"url":%q}}}`, srv.url, flaky.url))
	d.call("echo", `{"text":"hi"}`)
	approve := d.call("approve", `{"action":"deploy"}`)
	d.call("sleep", `{"seconds":3000}`)
	onFlaky := clitest.OnlyID(t, d.run("call", "--server", "flaky", "pipeline", "--args", `{"stages":3}`).Must(t, 0))
	flaky.p.kill() // its task's polls fail from now on

	var env []string
	if noColor {
		env = append(env, "NO_COLOR=1")
	}
	tm := d.dashboard(width, height, env...)
	s := tm.waitScreen("the flaky server's task among the problems", func(s string) bool {
		return strings.Contains(s, "4 problems 1") && strings.Contains(s, "2 waiting 1") && strings.Contains(s, "1 open 3")
	})
	// With the reason where it fits beside the push stream's (which comes
	// when that stream drops, so either may show).
	if width >= 200 && !strings.Contains(s, "✗ flaky unreachable") {
		t.Errorf("the header does not say flaky is unreachable:\n%s", s)
	}
	short := onFlaky[len(onFlaky)-4:]
	if rows := rowsOf(s, "pipeline"); len(rows) != 1 || rows[0].symbol != "⚠" || !strings.Contains(rows[0].line, " "+short) {
		t.Errorf("the failing server's row: %+v\n%s", rows, s)
	}

	// 4: the problems alone.
	tm.keys("4")
	s = tm.waitText("[4 problems 1]")
	if rows := tableRows(s); len(rows) != 1 || rows[0].tool != "pipeline" {
		t.Errorf("problems shows %+v\n%s", rows, s)
	}

	// 2: the inbox, and its form one key away; esc goes back, nothing sent.
	tm.keys("2")
	s = tm.waitText("[2 waiting 1]", "WAIT")
	if rows := tableRows(s); len(rows) != 1 || rows[0].tool != "approve" {
		t.Errorf("the inbox shows %+v\n%s", rows, s)
	}
	tm.keys("a")
	tm.waitText("Approve deploy?")
	tm.keys("Escape")
	tm.waitText("input left unanswered")
	if st := srv.stats(t); st.Updates != 0 {
		t.Errorf("esc in the form sent %d answers", st.Updates)
	}

	// 0 and t: every task, with clock times.
	tm.keys("0", "t")
	clock := time.Now().Format("15:")
	s = tm.waitText("[0 all 4]", "times: absolute")
	if rows := rowsOf(s, "echo"); len(rows) != 1 || !strings.Contains(rows[0].line, clock) {
		t.Errorf("t: the echo row shows no clock time %s…: %+v", clock, rows)
	}

	// The id the column shows is one `get` takes, from another shell.
	rows := rowsOf(s, "approve")
	if len(rows) != 1 {
		t.Fatalf("no approve row:\n%s", s)
	}
	f := strings.Fields(rows[0].line)
	shown := f[0]
	if !strings.HasSuffix(approve, shown) {
		t.Fatalf("the approve row shows id %q, not the end of %s", shown, approve)
	}
	if out := d.run("get", shown); out.Code != 0 || !strings.Contains(out.Stdout, approve) {
		t.Errorf("get %s while the dashboard runs: %s", shown, out)
	}
	// ls takes the same groups, through the dashboard's socket.
	if out := d.run("ls", "--json", "--status", "waiting"); out.Code != 0 || strings.Count(out.Stdout, "\n") != 1 || !strings.Contains(out.Stdout, approve) {
		t.Errorf("ls --status waiting while the dashboard runs: %s", out)
	}

	if noColor {
		if n := sgrColours(tm.capture(true)); n != 0 {
			t.Errorf("NO_COLOR=1 but the screen has %d colour attributes", n)
		}
	}
	for i, l := range strings.Split(tm.screen(), "\n") {
		if w := len([]rune(l)); w > width {
			t.Fatalf("line %d is %d cells wide at %d columns: %q", i, w, width, l)
		}
	}
	tm.quit()
}
