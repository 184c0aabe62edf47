package e2e

// The dashboard's ctrl+z and mouse, end to end: the real binary in a tmux
// pane, under an interactive shell (for ctrl+z, whose job control is the
// shell's), and mouse events written to the pane as SGR sequences.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// startShellTerm runs an interactive bash, with exactly env, in a
// width×height tmux pane of a private tmux server. Job control is on.
func startShellTerm(t *testing.T, width, height int, env []string) *tuiTerm {
	t.Helper()
	// startTerm's tmux server and cleanup, with its first program done.
	tm := startTerm(t, width, height, env, "--version")
	tm.waitExit()
	os.Remove(tm.exit) // nothing writes it again: the shell is running
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash is not installed: the suspend test needs a shell with job control")
	}
	tm.tmuxMust(append(append([]string{"new-window", "-t", "td", "env", "-i"}, env...),
		"PS1=$ ", bash, "--norc", "--noprofile", "-i")...)
	tm.tmuxMust("kill-window", "-t", "td:0")
	pid, err := strconv.Atoi(strings.TrimSpace(tm.tmuxMust("display-message", "-p", "-t", "td", "#{pane_pid}")))
	if err != nil {
		t.Fatal(err)
	}
	tm.pgid = pid // startTerm's cleanup ends the shell's process group
	// The shell's jobs (taskdeck, maybe stopped) are its children: end
	// them by pid, then the shell, before the tmux server goes.
	t.Cleanup(func() {
		b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "task", strconv.Itoa(pid), "children"))
		for _, f := range strings.Fields(string(b)) {
			if c, err := strconv.Atoi(f); err == nil {
				syscall.Kill(c, syscall.SIGKILL)
			}
		}
	})
	tm.waitScreen("the shell's prompt", func(s string) bool { return strings.HasPrefix(s, "$") })
	return tm
}

// TestTUISuspendResume: ctrl+z stops the dashboard and gives the terminal
// back to the shell; fg resumes it and the table is drawn again; q still
// quits with 0.
func TestTUISuspendResume(t *testing.T) {
	t.Parallel()
	for _, size := range [][2]int{{80, 24}, {200, 60}} {
		t.Run(fmt.Sprintf("%dx%d", size[0], size[1]), func(t *testing.T) {
			t.Parallel()
			d, _ := tuiDeck(t)
			d.call("sleep", `{"seconds":3000}`)
			tm := startShellTerm(t, size[0], size[1], tuiEnv(d.env))
			// Alone on its line: a list (taskdeck; echo) would go on to its
			// next command when taskdeck stops.
			tm.typeText(shellCommand(append([]string{tdBin}, d.args(nil)...)))
			tm.keys("Enter")
			tm.waitScreen("the sleep row working", func(s string) bool { return oneRow(s, "sleep") == "working" })

			tm.keys("C-z")
			s := tm.waitScreen("the shell's job-control message", func(s string) bool {
				return strings.Contains(s, "Stopped") && !strings.Contains(s, "SERVER")
			})
			if strings.Contains(s, "Done") || strings.Contains(s, "Exit") {
				t.Fatalf("ctrl+z ended the dashboard instead of suspending it:\n%s", s)
			}

			tm.typeText("fg")
			tm.keys("Enter")
			tm.waitScreen("the table drawn again", func(s string) bool {
				return oneRow(s, "sleep") == "working" && strings.Contains(s, "SERVER")
			})
			tm.keys("q")
			tm.waitScreen("the shell's prompt after the dashboard", func(s string) bool {
				return !strings.Contains(s, "SERVER") && strings.HasSuffix(strings.TrimRight(s, "\n"), "$")
			})
			tm.typeText(`echo "EXITED $?"`)
			tm.keys("Enter")
			tm.waitText("EXITED 0")
		})
	}
}

// TestTUIMouse: the dashboard turns on the terminal's mouse reporting; a
// left click selects the row under it (the footer's position follows), and
// the wheel moves the cursor. The events are written to the pane as the
// bytes a terminal sends (tmux send-keys -H): tmux's own mouse needs an
// attached client to click in.
func TestTUIMouse(t *testing.T) {
	t.Parallel()
	for _, size := range [][2]int{{80, 24}, {200, 60}} {
		t.Run(fmt.Sprintf("%dx%d", size[0], size[1]), func(t *testing.T) {
			t.Parallel()
			d, _ := tuiDeck(t)
			for range 6 {
				d.call("sleep", `{"seconds":3000}`)
			}
			d.call("echo", `{"text":"hi"}`)
			tm := d.dashboard(size[0], size[1])
			s := tm.waitScreen("seven rows", func(s string) bool { return len(tableRows(s)) == 7 })
			if footerPos.FindString(s) != "1/7" {
				t.Fatalf("the cursor does not start on the first row:\n%s", s)
			}
			// The dashboard asked the terminal for mouse reports, in SGR form:
			// without that a real terminal (tmux with mouse on) sends none.
			if f := strings.Fields(tm.tmuxMust("display-message", "-p", "-t", "td", "#{mouse_sgr_flag} #{mouse_button_flag}#{mouse_all_flag}")); len(f) != 2 || f[0] != "1" || !strings.Contains(f[1], "1") {
				t.Fatalf("the dashboard did not turn on SGR mouse reporting (tmux flags %q)", f)
			}
			// The fourth row's screen line: the column titles' line + 4.
			lines := strings.Split(s, "\n")
			title := 0
			for i, l := range lines {
				if strings.Contains(l, "SERVER") && strings.Contains(l, "TOOL") {
					title = i
					break
				}
			}
			// SGR mouse: ESC [ < button ; column ; row M (press), m (release), 1-based.
			tm.mouse(fmt.Sprintf("\x1b[<0;10;%dM\x1b[<0;10;%dm", title+5, title+5))
			tm.waitScreen("the cursor on the clicked fourth row", func(s string) bool { return footerPos.FindString(s) == "4/7" })
			tm.mouse(fmt.Sprintf("\x1b[<65;10;%dM", title+2)) // wheel down: three rows
			tm.waitScreen("the cursor three rows lower", func(s string) bool { return footerPos.FindString(s) == "7/7" })
			tm.mouse(fmt.Sprintf("\x1b[<64;10;%dM", title+2)) // wheel up
			tm.waitScreen("the cursor three rows higher", func(s string) bool { return footerPos.FindString(s) == "4/7" })
			tm.quit()
		})
	}
}

// mouse writes the bytes of seq to the pane, as a terminal would.
func (tm *tuiTerm) mouse(seq string) {
	tm.t.Helper()
	args := []string{"send-keys", "-t", "td", "-H"}
	for _, b := range []byte(seq) {
		args = append(args, fmt.Sprintf("%02x", b))
	}
	tm.tmuxMust(args...)
}

// shellCommand quotes args as one sh command line.
func shellCommand(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = shellQuote(a)
	}
	return strings.Join(q, " ")
}
