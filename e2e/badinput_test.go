package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/taskdeck/taskdeck/internal/clitest"
)

// TestBadInput: each mistake ends with one "taskdeck: " line on stderr,
// no trace, the documented exit code, and nothing synced is lost.
func TestBadInput(t *testing.T) {
	t.Parallel()
	srv := startDemo(t, "127.0.0.1:0")
	d := newDeck(t)

	// Tasks synced before the mistakes: a finished one and one waiting.
	echo := clitest.OnlyID(t, d.run("call", "--url", srv.url, "echo", "--args", `{"text":"kept"}`).Must(t, 0))
	approve := clitest.OnlyID(t, d.run("call", "--url", srv.url, "approve", "--args", `{"action":"keep"}`).Must(t, 0))
	d.waitStatus(approve, "input_required")
	synced := func(t *testing.T) {
		t.Helper()
		tasks := d.lsByID()
		if tasks[echo].Status != "completed" || tasks[approve].Status != "input_required" {
			t.Fatalf("synced tasks lost or changed: %+v", tasks)
		}
	}

	writeFile := func(t *testing.T, name, content string) string {
		t.Helper()
		path := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}

	cases := []struct {
		name string
		args func(t *testing.T) []string
		code int
		want []string
	}{
		{"malformed config JSON", func(t *testing.T) []string {
			path := writeFile(t, "broken.json", "{\"mcpServers\": {\n  \"a\": {\"url\": \"http://127.0.0.1:1/mcp\",}\n}}\n")
			return []string{"--config", path, "ls"}
		}, exitUsage, []string{"broken.json", "line 2, column"}},
		{"malformed config JSON on call", func(t *testing.T) []string {
			path := writeFile(t, "broken.json", "{\n  \"mcpServers\": {]\n}\n")
			return []string{"--config", path, "call", "--server", "a", "echo"}
		}, exitUsage, []string{"broken.json", "line 2, column"}},
		{"wrong-typed config: command", func(t *testing.T) []string {
			path := writeFile(t, "typed.json", `{"mcpServers": {"a": {"command": 5}}}`)
			return []string{"--config", path, "call", "--server", "a", "echo"}
		}, exitUsage, []string{"typed.json", "mcpServers.a.command", "string"}},
		{"wrong-typed config: mcpServers", func(t *testing.T) []string {
			path := writeFile(t, "typed.json", `{"mcpServers": ["a"]}`)
			return []string{"--config", path, "ls"}
		}, exitUsage, []string{"typed.json", "mcpServers"}},
		{"wrong-typed config: args", func(t *testing.T) []string {
			path := writeFile(t, "typed.json", `{"mcpServers": {"a": {"command": "x", "args": "--stdio"}}}`)
			return []string{"--config", path, "call", "--server", "a", "echo"}
		}, exitUsage, []string{"mcpServers.a.args", "list of strings"}},
		{"wrong-typed config: env value", func(t *testing.T) []string {
			path := writeFile(t, "typed.json", `{"mcpServers": {"a": {"command": "x", "env": {"TOKEN": 5}}}}`)
			return []string{"--config", path, "call", "--server", "a", "echo"}
		}, exitUsage, []string{"mcpServers.a.env.TOKEN", "want a string, got a number"}},
		{"wrong-typed config: headers", func(t *testing.T) []string {
			path := writeFile(t, "typed.json", `{"mcpServers": {"a": {"url": "http://127.0.0.1:1/mcp", "headers": ["Authorization: x"]}}}`)
			return []string{"--config", path, "call", "--server", "a", "echo"}
		}, exitUsage, []string{"mcpServers.a.headers", "object of strings"}},
		{"wrong-typed config: url", func(t *testing.T) []string {
			path := writeFile(t, "typed.json", `{"mcpServers": {"a": {"url": 5}}}`)
			return []string{"--config", path, "call", "--server", "a", "echo"}
		}, exitUsage, []string{"mcpServers.a.url", "got a number"}},
		{"wrong-typed config: server is a string", func(t *testing.T) []string {
			path := writeFile(t, "typed.json", `{"mcpServers": {"a": "build-mcp --stdio"}}`)
			return []string{"--config", path, "call", "--server", "a", "echo"}
		}, exitUsage, []string{"mcpServers.a", "got a string"}},
		{"config: both command and url", func(t *testing.T) []string {
			path := writeFile(t, "typed.json", `{"mcpServers": {"a": {"command": "x", "url": "http://127.0.0.1:1/mcp"}}}`)
			return []string{"--config", path, "call", "--server", "a", "echo"}
		}, exitUsage, []string{"mcpServers.a", "both"}},
		{"config: top level is a list", func(t *testing.T) []string {
			path := writeFile(t, "typed.json", `["a"]`)
			return []string{"--config", path, "ls"}
		}, exitUsage, []string{"typed.json", "got a list"}},
		{"config: unset ${VAR}", func(t *testing.T) []string {
			path := writeFile(t, "vars.json", `{"mcpServers": {"a": {"url": "http://127.0.0.1:1/mcp", "headers": {"Authorization": "Bearer ${TASKDECK_TEST_UNSET}"}}}}`)
			return []string{"--config", path, "call", "--server", "a", "echo"}
		}, exitUsage, []string{"TASKDECK_TEST_UNSET", "not set"}},
		{"unknown --server", func(*testing.T) []string {
			return []string{"call", "--server", "nope", "echo"}
		}, exitUsage, []string{`"nope"`}},
		{"--args is an array", func(*testing.T) []string {
			return []string{"call", "--url", srv.url, "echo", "--args", "[1]"}
		}, exitUsage, []string{"--args", "JSON object"}},
		{"--args is not JSON", func(*testing.T) []string {
			return []string{"call", "--url", srv.url, "echo", "--args", "nope"}
		}, exitUsage, []string{"--args", "JSON object"}},
		{"unknown id: get", func(*testing.T) []string { return []string{"get", "zzzzzz"} }, exitUsage, []string{`"zzzzzz"`}},
		{"unknown id: cancel", func(*testing.T) []string { return []string{"cancel", "zzzzzz"} }, exitUsage, []string{`"zzzzzz"`}},
		{"unknown id: answer", func(*testing.T) []string {
			return []string{"answer", "zzzzzz", "approve-1", approveAnswer}
		}, exitUsage, []string{`"zzzzzz"`}},
		{"answer for a key not asked", func(*testing.T) []string {
			return []string{"answer", approve, "approve-9", approveAnswer}
		}, exitUsage, []string{"approve-9", "approve-1"}},
		{"answer that fails the schema", func(*testing.T) []string {
			return []string{"answer", approve, "approve-1", `{"action":"accept","content":{"approve":"yes","reason":"ok"}}`}
		}, exitUsage, []string{"approve-1", "approve"}},
		{"answer missing a required field", func(*testing.T) []string {
			return []string{"answer", approve, "approve-1", `{"action":"accept","content":{"approve":true}}`}
		}, exitUsage, []string{"approve-1", "reason"}},
		{"answer that is not JSON", func(*testing.T) []string {
			return []string{"answer", approve, "approve-1", `{accept}`}
		}, exitUsage, []string{"JSON"}},
		{"--input without =", func(*testing.T) []string {
			return []string{"call", "--url", srv.url, "approve", "--input", "approve-1"}
		}, exitUsage, []string{"--input"}},
		{"unknown flag", func(*testing.T) []string { return []string{"ls", "--bogus"} }, exitUsage, []string{"bogus"}},
		{"server is down", func(t *testing.T) []string {
			return []string{"call", "--url", "http://" + clitest.ClosedPort(t) + "/mcp", "sleep", "--args", `{"seconds":1}`}
		}, exitUnreachable, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := d.run(c.args(t)...)
			if r.Code != c.code {
				t.Errorf("want exit %d\n%s", c.code, r)
			}
			clitest.OneErrorLine(t, r, c.want...)
			synced(t)
		})
	}

	t.Run("store owned by another process", func(t *testing.T) {
		holder := d.start("call", "--url", srv.url, "sleep", "--args", `{"seconds":1200}`, "--wait")
		clitest.WaitFor(t, "the holder to poll", func() bool {
			return strings.Contains(holder.Stdout.String(), " working ") || holder.exited()
		})
		if holder.exited() {
			t.Fatalf("holder ended: exit %d\n%s\n%s", holder.Code, holder.Stdout, holder.Stderr)
		}
		// Every other command works through the owner's socket (exit 4 is
		// for a store held by a process that serves no deck: TestExitCodes).
		for _, args := range [][]string{{"ls"}, {"get", echo}, {"call", "--url", srv.url, "echo", "--args", `{"text":"through the owner"}`}} {
			d.run(args...).Must(t, exitOK)
		}
		holder.kill()
		tasks := d.lsByID()
		if len(tasks) != 4 {
			t.Fatalf("after the holder died: %+v", tasks)
		}
		synced(t)
		// Stop the holder's task so that the last watch has nothing long to follow.
		for id, tk := range tasks {
			if tk.Tool == "sleep" {
				d.run("cancel", id).Must(t, 0)
				d.waitStatus(id, "cancelled")
			}
		}
	})

	t.Run("--data-dir is a regular file", func(t *testing.T) {
		file := writeFile(t, "not-a-dir", "x")
		r := runTD(t, d.env, "--data-dir", file, "--config", d.config, "ls").Must(t, exitLocal)
		clitest.OneErrorLine(t, r, file)
		synced(t)
	})

	// After all that, the waiting task still takes its answer.
	d.run("answer", approve, "approve-1", approveAnswer).Must(t, 0)
	d.run("watch").Must(t, 0)
	if tk := d.getJSON(approve); tk.Status != "completed" || tk.resultText() != "approved keep: ok" {
		t.Fatalf("after the mistakes, the answer: %+v", tk)
	}
}
