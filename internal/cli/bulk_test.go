package cli

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/taskdeck/taskdeck/internal/clitest"
)

// TestBulkCommands: cancel, forget and rerun act on several tasks at once,
// chosen by ids, by ids on stdin (what ls prints), or by a filter that is
// confirmed on a terminal or by --yes; ls lists newest first.
func TestBulkCommands(t *testing.T) {
	t.Parallel()
	c := newInproc(t)
	c.writeConfig(fmt.Sprintf(`{"mcpServers":{"demo":{"url":%q}}}`, demoURL(t)))
	call := func(tool, args string) string {
		return clitest.OnlyID(t, c.run("call", "--server", "demo", tool, "--args", args).Must(t, exitOK))
	}
	var sleeps []string
	for range 4 {
		sleeps = append(sleeps, call("sleep", `{"seconds":600}`))
	}
	echo := call("echo", `{"text":"keep"}`)
	status := func(id string) string {
		r := c.run("get", id, "--json").Must(t, exitOK)
		_, rest, _ := strings.Cut(r.Stdout, `"status":"`)
		st, _, _ := strings.Cut(rest, `"`)
		return st
	}

	// ls: newest first.
	lines := strings.Split(strings.TrimSpace(c.run("ls").Must(t, exitOK).Stdout), "\n")
	if first := strings.Fields(lines[1])[0]; first != echo {
		t.Fatalf("ls does not list the newest first:\n%s", strings.Join(lines, "\n"))
	}

	// A filter with no terminal and no --yes does nothing, and says why.
	r := c.run("cancel", "--search", "tool:sleep").Must(t, exitUsage)
	clitest.OneErrorLine(t, r, "select 4 tasks to cancel", "--yes")
	// A filter confirmed on the terminal.
	c.prompt = "y\n"
	r = c.run("cancel", "--search", "tool:sleep", "--status", "open").Must(t, exitOK)
	c.prompt = ""
	if !strings.Contains(r.Stdout, "cancel 4 tasks") {
		t.Fatalf("no confirmation asked:\n%s", r)
	}
	for _, id := range sleeps {
		clitest.WaitFor(t, "task "+id+" to be cancelled", func() bool { return status(id) == "cancelled" })
	}
	if st := status(echo); st != "completed" {
		t.Fatalf("the filter reached the echo task: %s", st)
	}

	// rerun by ids on stdin, as ls prints them: a header and one row each.
	c.prompt = c.run("ls", "--search", "tool:sleep").Must(t, exitOK).Stdout
	r = c.run("rerun", "-").Must(t, exitOK)
	c.prompt = ""
	reruns := strings.Fields(r.Stdout)
	if len(reruns) != len(sleeps) {
		t.Fatalf("rerun printed %v, want %d new ids\n%s", reruns, len(sleeps), r)
	}

	// forget several ids, one of them unknown: the rest go, the exit says which failed.
	r = c.run("forget", sleeps[0], sleeps[1], "nosuchtask").Must(t, exitUsage)
	if !strings.Contains(r.Stdout, "forgot task "+sleeps[0]) || !strings.Contains(r.Stdout, "forgot task "+sleeps[1]) {
		t.Fatalf("forget did not forget the known ids:\n%s", r)
	}
	if !strings.Contains(r.Stderr, "1 task of 3 failed (nosuchtask)") {
		t.Fatalf("forget does not say which failed:\n%s", r)
	}
	left := c.run("ls", "--search", "tool:sleep", "--status", "cancelled").Must(t, exitOK).Stdout
	if slices.ContainsFunc(sleeps[:2], func(id string) bool { return strings.Contains(left, id) }) {
		t.Fatalf("forgotten tasks still listed:\n%s", left)
	}

	// Ids and a filter together, or nothing at all, are usage errors.
	clitest.OneErrorLine(t, c.run("cancel", sleeps[2], "--status", "open").Must(t, exitUsage), "not both")
	clitest.OneErrorLine(t, c.run("forget").Must(t, exitUsage), "name the tasks to forget")
}

// TestServersReport: `servers` says per server how many tasks are open and
// how many wait for input, in a table and as JSON.
func TestServersReport(t *testing.T) {
	t.Parallel()
	c := newInproc(t)
	c.writeConfig(fmt.Sprintf(`{"mcpServers":{"demo":{"url":%q},"idle":{"url":%q}}}`, demoURL(t), demoURL(t)))
	c.run("call", "--server", "demo", "sleep", "--args", `{"seconds":600}`).Must(t, exitOK)
	c.run("call", "--server", "demo", "approve", "--args", `{"action":"deploy"}`, "--wait").Must(t, exitWaiting)

	r := c.run("servers").Must(t, exitOK)
	clitest.MustContain(t, r, r.Stdout, "NAME", "OPEN", "WAITING", "PUSH")
	for _, l := range strings.Split(r.Stdout, "\n") {
		if f := strings.Fields(l); len(f) >= 4 && f[0] == "demo" && (f[2] != "2" || f[3] != "1") {
			t.Fatalf("demo's row does not count 2 open, 1 waiting:\n%s", r.Stdout)
		}
	}
	type row struct {
		Name          string `json:"name"`
		Open, Waiting int
	}
	var rows []row
	for l := range strings.Lines(c.run("servers", "--json").Must(t, exitOK).Stdout) {
		var row row
		if err := json.Unmarshal([]byte(l), &row); err != nil {
			t.Fatalf("servers --json: %v in %q", err, l)
		}
		rows = append(rows, row)
	}
	if len(rows) != 2 || rows[0].Name != "demo" || rows[0].Open != 2 || rows[0].Waiting != 1 || rows[1].Name != "idle" || rows[1].Open != 0 {
		t.Fatalf("servers --json: %+v", rows)
	}
}
