package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTUISearchPaletteBulkRerun drives the built dashboard in tmux at
// 80×24 and 200×60, in colour and with NO_COLOR: a field search, mark
// all from the command palette, a bulk cancel that lists its targets, a
// re-run of a failed task, and a key rebound in the config file.
func TestTUISearchPaletteBulkRerun(t *testing.T) {
	for _, c := range []struct {
		w, h    int
		noColor bool
	}{{80, 24, false}, {80, 24, true}, {200, 60, false}, {200, 60, true}} {
		t.Run(fmt.Sprintf("%dx%d/nocolor=%v", c.w, c.h, c.noColor), func(t *testing.T) {
			t.Parallel()
			d, srv := tuiDeck(t)
			// Re-run answers to ctrl+r as well as R; the help says so.
			d.writeConfig(fmt.Sprintf(`{"mcpServers":{"demo":{"url":%q}},"dashboard":{"keys":{"rerun":["ctrl+r","R"]}}}`, srv.url))
			failID := d.call("fail", `{"mode":"error"}`)
			var sleeps []string
			for range 3 {
				sleeps = append(sleeps, d.call("sleep", `{"seconds":3000}`))
			}
			d.call("echo", `{"text":"hello"}`)
			var env []string
			if c.noColor {
				env = append(env, "NO_COLOR=1")
			}
			tm := d.dashboard(c.w, c.h, env...)
			tm.waitScreen("fail failed, three sleeps working", func(s string) bool {
				return oneRow(s, "fail") == "failed" && len(rowsOf(s, "sleep")) == 3 && oneRow(s, "echo") == "completed"
			})

			// A field search: only the sleeps.
			tm.keys("/")
			tm.typeText("tool:sleep")
			tm.keys("Enter")
			tm.waitScreen("only the three sleeps", func(s string) bool {
				rows := tableRows(s)
				return len(rows) == 3 && len(rowsOf(s, "sleep")) == 3
			})

			// Mark all from the palette, then cancel: the question lists them.
			tm.keys(":")
			tm.waitText("Go to, or do", "inbox")
			tm.typeText("mark all")
			tm.waitText("> mark all")
			tm.keys("Enter")
			tm.waitText("marked all 3 tasks shown")
			tm.keys("c")
			s := tm.waitText("Cancel 3 tasks on the server?", "[ No ]", "Yes, cancel")
			for _, id := range sleeps {
				if !strings.Contains(s, id) {
					t.Fatalf("the question does not list %s:\n%s", id, s)
				}
			}
			tm.keys("y")
			tm.waitScreen("three sleeps cancelled", func(s string) bool {
				rs := rowsOf(s, "sleep")
				return len(rs) == 3 && rs[0].status == "cancelled" && rs[1].status == "cancelled" && rs[2].status == "cancelled"
			})
			tm.waitText("cancel sent to 3 tasks")
			if n := srv.stats(t).Cancels; n != 3 {
				t.Fatalf("the server got %d tasks/cancel, want 3", n)
			}

			// Re-run the failed task with the configured ctrl+r.
			tm.keys("Escape")
			tm.waitScreen("every row again", func(s string) bool { return oneRow(s, "fail") == "failed" })
			tm.selectRow("fail")
			tm.keys("C-r")
			tm.waitText("Re-run 1 task?", failID, "Yes, re-run")
			tm.keys("y")
			tm.waitScreen("two fail rows, both failed", func(s string) bool {
				rs := rowsOf(s, "fail")
				return len(rs) == 2 && rs[0].status == "failed" && rs[1].status == "failed"
			})
			if n := srv.stats(t).ToolCalls["fail"]; n != 2 {
				t.Fatalf("the server got %d calls of fail, want 2", n)
			}
			tm.keys("?")
			tm.waitText("ctrl+r/R re-run")
			tm.keys("Escape") // closes the help
			tm.waitText("SERVER")
			if c.noColor {
				if n := sgrColours(tm.rawOutput()); n != 0 {
					t.Fatalf("NO_COLOR=1 but the program sent %d colour attributes", n)
				}
			}
			tm.quit()
			// The search was kept for the next run, in the data directory.
			if b, err := os.ReadFile(filepath.Join(d.dataDir, "search-history")); err != nil || !strings.Contains(string(b), "tool:sleep") {
				t.Fatalf("search history: %q, %v", b, err)
			}
		})
	}
}

// A wrong dashboard section stops the dashboard before it draws, exit 2,
// with one line that names the file and the entry.
func TestTUIBadDashboardConfig(t *testing.T) {
	t.Parallel()
	d, srv := tuiDeck(t)
	d.writeConfig(fmt.Sprintf(`{"mcpServers":{"demo":{"url":%q}},"dashboard":{"keys":{"cancel":["d"]}}}`, srv.url))
	tm := d.dashboard(80, 24)
	if code := tm.waitExit(); code != 2 {
		t.Fatalf("exit %d, want 2; screen:\n%s", code, tm.screen())
	}
	s := strings.ReplaceAll(strings.TrimSpace(tm.screen()), "\n", "") // one line, wrapped at 80
	want := `config ` + d.config + `: dashboard.keys: "d" would mean both "cancel" and "forget" in the table; bind one of them to another key`
	if !strings.Contains(s, want) {
		t.Fatalf("the screen:\n%s\nwant the line %q", s, want)
	}
}
