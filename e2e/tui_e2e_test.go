package e2e

// End-to-end tests of the dashboard: the real binary (built by TestMain in
// main_test.go) runs in a real terminal, a detached tmux session on a
// private tmux server, against a real demo server on loopback. Keys go in
// with `tmux send-keys`; the screen comes back with `tmux capture-pane`.
// Every wait polls the screen until a condition holds; there are no fixed
// sleeps standing in for a condition.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/internal/clitest"
	"github.com/taskdeck/taskdeck/internal/waitfor"
)

// tuiTimeout bounds one wait on the screen. Generous: a loaded 2-core CI
// machine runs these tests in parallel with the rest of the suite.
var tuiTimeout = waitfor.Scale(20 * time.Second)

// tuiTerm is a taskdeck process running in a tmux pane of its own tmux
// server.
type tuiTerm struct {
	t    *testing.T
	tmux string // path of the tmux binary
	sock string // the private server's socket
	raw  string // everything the program wrote to the terminal (pipe-pane)
	exit string // the shell in the pane writes taskdeck's exit status here
	pgid int    // the pane's process group: its shell and taskdeck
}

// tuiEnv is the environment of the program inside the pane: the deck's
// private HOME and XDG directories, a known terminal type, and none of the
// outer terminal's or CI's colour settings.
func tuiEnv(base []string, extra ...string) []string {
	var env []string
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "TERM", "TMUX", "TMUX_PANE", "NO_COLOR", "COLORTERM", "CLICOLOR", "CLICOLOR_FORCE", "TERM_PROGRAM", "COLUMNS", "LINES":
			continue
		}
		env = append(env, kv)
	}
	return append(append(env, "TERM=xterm-256color"), extra...)
}

// startTerm runs tdBin with args in a width×height tmux pane with exactly
// the environment env. Its output is recorded from the first byte on.
func startTerm(t *testing.T, width, height int, env []string, args ...string) *tuiTerm {
	t.Helper()
	tmuxPath, err := exec.LookPath("tmux")
	if err != nil {
		t.Skip("tmux is not installed (apt-get install -y tmux): the terminal end-to-end tests need it")
	}
	envPath, err := exec.LookPath("env")
	if err != nil {
		t.Fatal(err)
	}
	// A short private directory: a unix socket path must stay under 108 bytes.
	dir, err := os.MkdirTemp("", "tdtmux-")
	if err != nil {
		t.Fatal(err)
	}
	tm := &tuiTerm{t: t, tmux: tmuxPath, sock: filepath.Join(dir, "sock"),
		raw: filepath.Join(dir, "raw"), exit: filepath.Join(dir, "exit")}
	conf := filepath.Join(dir, "tmux.conf")
	// escape-time 0: tmux passes ESC on at once. remain-on-exit: the pane
	// and its last screen stay after the program ends.
	if err := os.WriteFile(conf, []byte("set -g escape-time 0\nset -g remain-on-exit on\nset -g history-limit 0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Until the shell has written the exit status, the pane's process
		// group (the shell and taskdeck, no job control) is ours.
		if _, exited := tm.exited(); !exited && tm.pgid > 0 {
			syscall.Kill(-tm.pgid, syscall.SIGKILL)
		}
		tm.tmuxQuiet("kill-server")
		os.RemoveAll(dir)
	})
	// The pane's shell first waits for a line on its terminal, so that
	// pipe-pane records from taskdeck's first byte; then it runs taskdeck
	// (through env -i: exactly env) and writes its exit status to a file.
	// (tmux's own #{pane_dead_status} is not reliable: it stays empty when
	// the terminal's EOF is seen before the child's exit.)
	cmd := []string{"-f", conf, "new-session", "-d", "-s", "td", "-x", strconv.Itoa(width), "-y", strconv.Itoa(height),
		"sh", "-c", `read -r _ && "$@"; echo "$?" > "$0"`, tm.exit, envPath, "-i"}
	cmd = append(cmd, env...)
	cmd = append(cmd, tdBin)
	cmd = append(cmd, args...)
	tm.tmuxMust(cmd...)
	tm.tmuxMust("pipe-pane", "-t", "td", "-o", "cat >> "+shellQuote(tm.raw))
	pid, err := strconv.Atoi(strings.TrimSpace(tm.tmuxMust("display-message", "-p", "-t", "td", "#{pane_pid}")))
	if err != nil {
		t.Fatal(err)
	}
	tm.pgid = pid // the shell leads the pane's session and process group
	tm.tmuxMust("send-keys", "-t", "td", "Enter")
	return tm
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// tmuxCmd runs one tmux client command against the private server.
func (tm *tuiTerm) tmuxCmd(args ...string) (string, error) {
	cmd := exec.Command(tm.tmux, append([]string{"-S", tm.sock}, args...)...)
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TMUX=") && !strings.HasPrefix(kv, "TMUX_PANE=") {
			env = append(env, kv)
		}
	}
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("tmux %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

func (tm *tuiTerm) tmuxMust(args ...string) string {
	tm.t.Helper()
	out, err := tm.tmuxCmd(args...)
	if err != nil {
		tm.t.Fatal(err)
	}
	return out
}

func (tm *tuiTerm) tmuxQuiet(args ...string) { tm.tmuxCmd(args...) }

// keys sends tmux key names (Enter, Down, Escape, y, ...), one after another.
func (tm *tuiTerm) keys(keys ...string) {
	tm.t.Helper()
	for _, k := range keys {
		tm.tmuxMust("send-keys", "-t", "td", k)
	}
}

// typeText sends text literally.
func (tm *tuiTerm) typeText(s string) {
	tm.t.Helper()
	tm.tmuxMust("send-keys", "-t", "td", "-l", s)
}

// screen is the pane as plain text; colour is true for ANSI attributes too.
func (tm *tuiTerm) capture(colour bool) string {
	tm.t.Helper()
	args := []string{"capture-pane", "-p", "-t", "td"}
	if colour {
		args = append(args, "-e")
	}
	return tm.tmuxMust(args...)
}

func (tm *tuiTerm) screen() string { tm.t.Helper(); return tm.capture(false) }

// waitScreen polls the screen until cond holds and returns that screen.
func (tm *tuiTerm) waitScreen(what string, cond func(s string) bool) string {
	tm.t.Helper()
	return tm.waitScreenFor(tuiTimeout, what, cond)
}

func (tm *tuiTerm) waitScreenFor(d time.Duration, what string, cond func(s string) bool) string {
	tm.t.Helper()
	deadline := time.Now().Add(d)
	for {
		s := tm.screen()
		if cond(s) {
			return s
		}
		if code, ok := tm.exited(); ok {
			tm.t.Fatalf("taskdeck ended (exit %d) while waiting for %s; screen:\n%s", code, what, s)
		}
		if time.Now().After(deadline) {
			tm.t.Fatalf("gave up after %s waiting for %s; screen:\n%s", d, what, s)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitText waits until the screen shows every one of want.
func (tm *tuiTerm) waitText(want ...string) string {
	tm.t.Helper()
	return tm.waitScreen(fmt.Sprintf("%q on screen", want), func(s string) bool { return len(clitest.Missing(s, want...)) == 0 })
}

// exited reports whether taskdeck has ended, and its exit status.
func (tm *tuiTerm) exited() (int, bool) {
	b, err := os.ReadFile(tm.exit)
	if err != nil || !strings.HasSuffix(string(b), "\n") {
		return 0, false
	}
	code, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return -1, true
	}
	return code, true
}

// waitExit waits for taskdeck to end and returns its exit status.
func (tm *tuiTerm) waitExit() int {
	tm.t.Helper()
	deadline := time.Now().Add(tuiTimeout)
	for {
		if code, ok := tm.exited(); ok {
			return code
		}
		if time.Now().After(deadline) {
			tm.t.Fatalf("taskdeck did not exit within %s; screen:\n%s", tuiTimeout, tm.screen())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// rawOutput is every byte the program wrote to its terminal.
func (tm *tuiTerm) rawOutput() string {
	tm.t.Helper()
	b, err := os.ReadFile(tm.raw)
	if err != nil && !os.IsNotExist(err) {
		tm.t.Fatal(err)
	}
	return string(b)
}

// tuiRow is one row of the task table as it reads on screen.
type tuiRow struct {
	symbol, status, server, tool string
	line                         string
}

// tableRows parses the task table: the lines under the column titles, up
// to the first blank line. Below 100 columns the status column is its
// symbol alone (titled S): the status is read from the symbol (✗ reads
// as failed, though a tool error shows it too).
func tableRows(screen string) []tuiRow {
	lines := strings.Split(screen, "\n")
	var rows []tuiRow
	in, narrow := false, false
	for _, l := range lines {
		if !in {
			in = strings.Contains(l, "ID") && strings.Contains(l, "SERVER") && strings.Contains(l, "TOOL")
			narrow = in && !strings.Contains(l, "STATUS")
			continue
		}
		f := strings.Fields(l)
		if len(f) > 0 && f[0] == "*" { // marked
			f = f[1:]
		}
		if len(f) < 4 {
			break
		}
		f = f[1:] // the short id
		if narrow {
			f = append([]string{f[0], symbolStatus[f[0]]}, f[1:]...)
		}
		if len(f) < 4 {
			break
		}
		rows = append(rows, tuiRow{symbol: f[0], status: f[1], server: f[2], tool: f[3], line: l})
	}
	return rows
}

// symbolStatus reads a narrow status column's symbol.
var symbolStatus = map[string]string{
	"…": "calling", "●": "working", "?": "input_required", "!": "orphaned", "✓": "completed",
	"✗": "failed", "⊘": "cancelled", "∅": "unknown", "◇": "found", "↷": "left", "⚠": "",
}

// rowsOf are the table rows of one tool.
func rowsOf(screen, tool string) []tuiRow {
	var out []tuiRow
	for _, r := range tableRows(screen) {
		if r.tool == tool {
			out = append(out, r)
		}
	}
	return out
}

// oneRow reports the status of the only row of tool, "" when there is not
// exactly one.
func oneRow(screen, tool string) string {
	rs := rowsOf(screen, tool)
	if len(rs) != 1 {
		return ""
	}
	return rs[0].status
}

var footerPos = regexp.MustCompile(`(?m)^(\d+)/(\d+)\b`)

// selectedTool is the tool of the selected row, found by the cursor's
// position that the footer shows ("2/5 · sort: newest").
func selectedTool(screen string) string {
	m := footerPos.FindStringSubmatch(screen)
	if m == nil {
		return ""
	}
	n, _ := strconv.Atoi(m[1])
	rows := tableRows(screen)
	if n < 1 || n > len(rows) {
		return ""
	}
	return rows[n-1].tool
}

// selectRow moves the cursor onto the only row of tool.
func (tm *tuiTerm) selectRow(tool string) {
	tm.t.Helper()
	s := tm.screen()
	rows := tableRows(s)
	want := slices.IndexFunc(rows, func(r tuiRow) bool { return r.tool == tool })
	m := footerPos.FindStringSubmatch(s)
	if want < 0 || m == nil {
		tm.t.Fatalf("no row of %s or no position in the footer; screen:\n%s", tool, s)
	}
	at, _ := strconv.Atoi(m[1])
	for ; at-1 < want; at++ {
		tm.keys("Down")
	}
	for ; at-1 > want; at-- {
		tm.keys("Up")
	}
	pos := fmt.Sprintf("%d/%d", want+1, len(rows))
	tm.waitScreen("the cursor on the "+tool+" row ("+pos+")", func(s string) bool {
		return footerPos.FindString(s) == pos
	})
}

var sgrSeq = regexp.MustCompile(`\x1b\[([0-9;:]*)m`)

// sgrColours counts colour parameters (foreground or background, other
// than the defaults 39 and 49) in the SGR sequences of s.
func sgrColours(s string) int {
	n := 0
	for _, m := range sgrSeq.FindAllStringSubmatch(s, -1) {
		ps := strings.FieldsFunc(m[1], func(r rune) bool { return r == ';' || r == ':' })
		for i := 0; i < len(ps); i++ {
			p, _ := strconv.Atoi(ps[i])
			switch {
			case p == 38 || p == 48:
				n++
				i = len(ps) // the rest are the colour's own numbers
			case p >= 30 && p <= 37, p >= 40 && p <= 47, p >= 90 && p <= 97, p >= 100 && p <= 107:
				n++
			}
		}
	}
	return n
}

// tuiDeck is a deck whose config names one demo server "demo".
func tuiDeck(t *testing.T) (*deck, *demoServer) {
	t.Helper()
	srv := startDemo(t, "127.0.0.1:0")
	d := newDeck(t)
	d.writeConfig(fmt.Sprintf(`{"mcpServers":{"demo":{"url":%q}}}`, srv.url))
	return d, srv
}

func (d *deck) call(tool, args string) string {
	d.t.Helper()
	return clitest.OnlyID(d.t, d.run("call", "--server", "demo", tool, "--args", args).Must(d.t, 0))
}

// dashboard opens `taskdeck` on the deck in a tmux pane.
func (d *deck) dashboard(width, height int, extraEnv ...string) *tuiTerm {
	d.t.Helper()
	return startTerm(d.t, width, height, tuiEnv(d.env, extraEnv...), d.args(nil)...)
}

// quit presses q and checks that the dashboard exits 0.
func (tm *tuiTerm) quit() {
	tm.t.Helper()
	tm.keys("q")
	if code := tm.waitExit(); code != 0 {
		tm.t.Fatalf("taskdeck exited %d after q; screen:\n%s", code, tm.screen())
	}
}

// TestTUILiveAndAnswer: tasks launched with the CLI show up in the
// dashboard and change status live; an approve task is answered through
// the form; q quits cleanly and nothing but the renderer wrote to the
// terminal.
func TestTUILiveAndAnswer(t *testing.T) {
	t.Parallel()
	d, srv := tuiDeck(t)
	approveID := d.call("approve", `{"action":"deploy"}`)
	// 140 demo seconds are 7 s here: long enough to be seen working first.
	sleepID := d.call("sleep", `{"seconds":140}`)

	tm := d.dashboard(100, 30)
	s := tm.waitScreen("both rows, the sleep working", func(s string) bool {
		return oneRow(s, "sleep") == "working" && oneRow(s, "approve") != ""
	})
	if r := rowsOf(s, "sleep")[0]; r.symbol != "●" || r.server != "demo" {
		t.Fatalf("working row reads %q", r.line)
	}

	// (b) answer: i jumps to the waiting task, a opens its form.
	tm.waitScreen("the approve task waiting for input", func(s string) bool {
		return oneRow(s, "approve") == "input_required"
	})
	if selectedTool(tm.screen()) == "approve" { // start elsewhere, so that i has to move
		tm.keys("Down")
		tm.waitScreen("the cursor on the sleep row", func(s string) bool { return selectedTool(s) == "sleep" })
	}
	tm.keys("i")
	tm.waitScreen("the cursor on the approve row", func(s string) bool { return selectedTool(s) == "approve" })
	tm.keys("a")
	tm.waitText("approve · input approve-1", "Approve deploy?", "Approve *", "Reason *", "esc back, nothing sent")
	tm.keys("y") // the confirm field: yes, and on to the next field
	tm.waitText("┃ Reason *")
	tm.typeText("ship it")
	tm.waitText("> ship it")
	tm.keys("Enter")
	// Status-line messages show for 5 s: look for it before the polls
	// that complete the task.
	tm.waitText("answered: task " + approveID)
	tm.waitScreen("the approve row completed", func(s string) bool { return oneRow(s, "approve") == "completed" })

	// (a) live: the sleep finishes while we watch.
	tm.waitScreen("the sleep row completed", func(s string) bool { return oneRow(s, "sleep") == "completed" })
	s = tm.screen()
	if r := rowsOf(s, "sleep")[0]; r.symbol != "✓" || !strings.Contains(r.line, "slept 140 of 140 s") {
		t.Fatalf("completed row reads %q", r.line)
	}
	if strings.Contains(s, "input_required") || strings.Contains(s, "working") {
		t.Fatalf("stale statuses on screen:\n%s", s)
	}

	// (f) q quits with 0, and the terminal saw nothing but the renderer.
	tm.quit()
	after := tm.screen()
	for _, l := range strings.Split(after, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "Pane is dead") {
			t.Fatalf("the terminal after quitting shows %q; screen:\n%s", l, after)
		}
	}
	raw := tm.rawOutput()
	if !strings.Contains(raw, "\x1b[?1049h") || !strings.Contains(raw, "\x1b[?1049l") {
		t.Fatalf("the dashboard did not enter and leave the alternate screen (%d bytes recorded)", len(raw))
	}
	for _, bad := range []string{"level=", "badger", "Badger", "panic", "goroutine ", "taskdeck: ", "WARN", "ERROR", "INFO", "DEBUG"} {
		if i := strings.Index(raw, bad); i >= 0 {
			t.Fatalf("something besides the renderer wrote %q to the terminal: …%q…", bad, raw[max(i-80, 0):min(i+80, len(raw))])
		}
	}
	if st, err := os.Stat(filepath.Join(d.dataDir, "taskdeck.log")); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the log file should be in the data directory, private: %v %v", st, err)
	}

	// The store is free again: the answer really went out.
	tk := d.getJSON(approveID)
	if tk.Status != "completed" || tk.IsError || tk.resultText() != "approved deploy: ship it" {
		t.Fatalf("approve task after the dashboard: %+v (result %q)", tk, tk.resultText())
	}
	if !slices.Equal(tk.AnsweredKeys, []string{"approve-1"}) {
		t.Fatalf("answeredKeys = %v", tk.AnsweredKeys)
	}
	if tk := d.getJSON(sleepID); tk.Status != "completed" {
		t.Fatalf("sleep task after the dashboard: %+v", tk)
	}
	if n := srv.stats(t).Updates; n != 1 {
		t.Fatalf("the server saw %d tasks/update, want 1", n)
	}
}

// TestTUICancelPruneNewCallResize: cancel a long sleep, prune the finished
// rows, launch a new call through the pickers and the argument form, and
// survive a resize.
func TestTUICancelPruneNewCallResize(t *testing.T) {
	t.Parallel()
	d, srv := tuiDeck(t)
	echoID := d.call("echo", `{"text":"hello"}`)
	failID := d.call("fail", `{"mode":"error"}`)
	approveID := d.call("approve", `{"action":"stay open"}`)
	sleepID := d.call("sleep", `{"seconds":3000}`)

	tm := d.dashboard(100, 30)
	tm.waitScreen("four rows: echo completed, fail failed, approve waiting, sleep working", func(s string) bool {
		return oneRow(s, "echo") == "completed" && oneRow(s, "fail") == "failed" &&
			oneRow(s, "approve") == "input_required" && oneRow(s, "sleep") == "working"
	})

	// (c) cancel: select the sleep, c, y.
	tm.selectRow("sleep")
	tm.keys("c")
	tm.waitText("Cancel 1 task on the server?", sleepID, "[ No ]", "Yes, cancel")
	tm.keys("y")
	s := tm.waitScreen("the sleep row cancelled", func(s string) bool { return oneRow(s, "sleep") == "cancelled" })
	if r := rowsOf(s, "sleep")[0]; r.symbol != "⊘" {
		t.Fatalf("cancelled row reads %q", r.line)
	}
	if n := srv.stats(t).Cancels; n != 1 {
		t.Fatalf("the server saw %d tasks/cancel, want 1", n)
	}

	// (d) prune: the question counts the finished tasks; only they go.
	tm.keys("p")
	tm.waitText("Prune 3 finished tasks (completed, failed, cancelled, unknown)?")
	tm.keys("y")
	tm.waitText("pruned 3 finished tasks")
	tm.waitScreen("only the approve row left", func(s string) bool {
		rows := tableRows(s)
		return len(rows) == 1 && rows[0].tool == "approve" && rows[0].status == "input_required"
	})

	// (e) new call: n, the server, the tool, its arguments.
	tm.keys("n")
	tm.waitText("New call: choose a server", "> demo")
	tm.keys("Enter")
	s = tm.waitText("New call on demo: choose a tool", "sleep          Sleeps")
	// Move down to sleep: count the tools listed above it.
	var tools []string
	for _, l := range strings.Split(s, "\n") {
		f := strings.Fields(strings.Trim(l, "│ "))
		if len(f) > 0 && (f[0] == ">" || strings.HasPrefix(l, "│   ")) {
			name := f[0]
			if name == ">" && len(f) > 1 {
				name = f[1]
			}
			tools = append(tools, name)
		}
	}
	at := slices.Index(tools, "sleep")
	if at < 0 {
		t.Fatalf("sleep is not among the tools %q; screen:\n%s", tools, s)
	}
	for range at {
		tm.keys("Down")
	}
	tm.waitText("> sleep")
	tm.keys("Enter")
	tm.waitText("demo · sleep", "seconds *", "how long to sleep")
	tm.typeText("3500")
	tm.waitText("> 3500")
	tm.keys("Enter")
	tm.waitText("Idempotency key (optional)") // the last field; left empty
	tm.keys("Enter")
	tm.waitText("launched: task ")
	tm.waitScreen("the new sleep row working", func(s string) bool {
		return oneRow(s, "sleep") == "working" && oneRow(s, "approve") == "input_required"
	})
	if st := srv.stats(t); st.ToolCalls["sleep"] != 2 || st.TasksCreated != 4 {
		t.Fatalf("after the new call the server saw %+v", st)
	}

	// (g) a smaller terminal keeps the counts, titles and footer on screen.
	tm.tmuxMust("resize-window", "-t", "td", "-x", "80", "-y", "24")
	s = tm.waitScreen("the 80×24 layout", func(s string) bool {
		lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
		return len(lines) == 24 && strings.HasPrefix(lines[0], "taskdeck") &&
			strings.Contains(lines[2], "SERVER") && strings.Contains(lines[2], "NEXT") &&
			strings.Contains(lines[22], "sort: newest") && strings.Contains(lines[23], "help")
	})
	if rows := tableRows(s); len(rows) != 2 {
		t.Fatalf("want 2 rows at 80×24; screen:\n%s", s)
	}
	for i, l := range strings.Split(s, "\n") {
		if w := len([]rune(l)); w > 80 {
			t.Fatalf("line %d is %d cells wide at 80 columns: %q", i, w, l)
		}
	}

	// (f) q quits with 0.
	tm.quit()

	// The store agrees with what was on screen.
	byID := d.lsByID()
	for _, gone := range []string{echoID, failID, sleepID} {
		if _, ok := byID[gone]; ok {
			t.Fatalf("task %s should have been pruned: %+v", gone, byID[gone])
		}
	}
	if len(byID) != 2 || byID[approveID].Status != "input_required" {
		t.Fatalf("store after the dashboard: %+v", byID)
	}
}

// TestTUINoColor: with NO_COLOR the statuses read by symbol and name, and
// the renderer sends no colour at all.
func TestTUINoColor(t *testing.T) {
	t.Parallel()
	d, _ := tuiDeck(t)
	d.call("echo", `{"text":"hi"}`)
	d.call("fail", `{"mode":"error"}`)
	d.call("approve", `{"action":"wait"}`)
	d.call("sleep", `{"seconds":3000}`)

	tm := d.dashboard(100, 30, "NO_COLOR=1")
	want := map[string]string{"echo": "✓ completed", "fail": "✗ failed", "approve": "? input_required", "sleep": "● working"}
	s := tm.waitScreen("every status by symbol and name", func(s string) bool {
		for tool, look := range want {
			rs := rowsOf(s, tool)
			if len(rs) != 1 || rs[0].symbol+" "+rs[0].status != look {
				return false
			}
		}
		return true
	})
	if m := clitest.Missing(s, "✓ 1 completed", "✗ 1 failed", "? 1 input_required", "● 1 working"); len(m) > 0 {
		t.Fatalf("the counts line lacks %q; screen:\n%s", m, s)
	}
	if n := sgrColours(tm.capture(true)); n != 0 {
		t.Fatalf("NO_COLOR=1 but the screen has %d colour attributes:\n%q", n, tm.capture(true))
	}
	if n := sgrColours(tm.rawOutput()); n != 0 {
		t.Fatalf("NO_COLOR=1 but the program sent %d colour attributes", n)
	}
	tm.quit()
}

// TestTUIDemo: `taskdeck demo` shows every server-reported status within
// 30 seconds, in colour, and quits cleanly.
func TestTUIDemo(t *testing.T) {
	t.Parallel()
	env := tuiEnv(testEnv(t), "TMPDIR="+t.TempDir())
	tm := startTerm(t, 100, 30, env, "demo", "--speed", "0.2")
	want := []string{"working", "input_required", "completed", "failed", "cancelled"}
	seen := map[string]bool{}
	s := tm.waitScreenFor(waitfor.Scale(30*time.Second), fmt.Sprintf("every status of %q in the table", want), func(s string) bool {
		for _, r := range tableRows(s) {
			seen[r.status] = true
		}
		for _, w := range want {
			if !seen[w] {
				return false
			}
		}
		return true
	})
	if rows := tableRows(s); len(rows) < len(want) {
		t.Fatalf("the demo shows only %d tasks; screen:\n%s", len(rows), s)
	}
	if n := sgrColours(tm.capture(true)); n == 0 {
		t.Fatalf("TERM=xterm-256color but the demo shows no colour:\n%q", tm.capture(true))
	}
	tm.quit()
}

// TestTUIFormEscIsBack: esc in an input form goes back to the table and
// sends nothing; the task still waits, and its form opens again.
func TestTUIFormEscIsBack(t *testing.T) {
	t.Parallel()
	d, srv := tuiDeck(t)
	approveID := d.call("approve", `{"action":"deploy"}`)
	tm := d.dashboard(100, 30)
	tm.waitScreen("the approve task waiting for input", func(s string) bool { return oneRow(s, "approve") == "input_required" })
	tm.keys("a")
	tm.waitText("approve · input approve-1", "Approve deploy?")
	tm.keys("Escape")
	tm.waitText("input left unanswered: nothing sent")
	tm.keys("a") // still asked: the form opens again
	tm.waitText("approve · input approve-1", "Approve deploy?")
	tm.keys("Escape")
	tm.waitScreen("the table again", func(s string) bool { return oneRow(s, "approve") == "input_required" })
	tm.quit()
	if n := srv.stats(t).Updates; n != 0 {
		t.Fatalf("the server saw %d tasks/update after esc, want 0", n)
	}
	if tk := d.getJSON(approveID); tk.Status != "input_required" || len(tk.AnsweredKeys) != 0 {
		t.Fatalf("approve task after esc: %+v", tk)
	}
}

// TestTUIConfirmAndHelpAt80x24: at 80×24 the help shows every key,
// destructive ones and quit too; a question lists the tasks it acts on,
// leaves the table in sight, and enter means No.
func TestTUIConfirmAndHelpAt80x24(t *testing.T) {
	t.Parallel()
	d, srv := tuiDeck(t)
	sleepID := d.call("sleep", `{"seconds":3000}`)
	tm := d.dashboard(80, 24)
	tm.waitScreen("the sleep row working", func(s string) bool { return oneRow(s, "sleep") == "working" })
	tm.keys("?")
	want := []string{"c cancel", "d forget", "p prune", "q quit", "esc clear filters", "a answer input", "n new call"}
	tm.waitScreen(fmt.Sprintf("the help showing %q", want), func(s string) bool {
		return len(clitest.Missing(strings.Join(strings.Fields(s), " "), want...)) == 0 // the help pads its columns
	})
	tm.keys("Escape") // any key closes the help
	tm.waitText("SERVER", "NEXT")

	tm.keys("c")
	s := tm.waitText("Cancel 1 task on the server?", sleepID, "[ No ]", "Yes, cancel")
	if !strings.Contains(s, "SERVER") {
		t.Fatalf("the question hides the table:\n%s", s)
	}
	tm.keys("Enter")
	// "nothing done" shows for 5 s only, which a loaded machine's screen
	// polling can miss (the ui tests hold the message): the question is
	// gone and the row works on.
	tm.waitScreen("the question gone, the sleep row still working", func(s string) bool {
		return !strings.Contains(s, "Yes, cancel") && oneRow(s, "sleep") == "working"
	})
	tm.quit()
	if n := srv.stats(t).Cancels; n != 0 {
		t.Fatalf("enter on the question sent %d tasks/cancel, want 0", n)
	}
}
