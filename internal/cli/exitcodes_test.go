package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/internal/clitest"
	"github.com/taskdeck/taskdeck/internal/hostile"
	"github.com/taskdeck/taskdeck/store/badger"
)

// TestExitCodes checks every row of the README's exit-code list in
// process, against real demo servers and real stores: what a script
// branches on, and the one line an operator reads.
func TestExitCodes(t *testing.T) {
	t.Parallel()
	url := demoURL(t)
	refused, silent := "http://"+clitest.ClosedPort(t)+"/mcp", silentURL(t)
	h := hostile.Start(t, demo.Options{Speed: 0.05})
	h.On("tools/call", hostile.Error(-32602, "invalid params: the deploy window is closed"))
	refusing := h.URL
	garbled := hostile.Start(t, demo.Options{Speed: 0.05})
	garbled.On("tools/list", hostile.NotJSON())
	rows := []struct {
		name  string
		setup func(t *testing.T, c *inproc) // may be nil
		args  []string
		code  int
		want  []string // in the one stderr line
	}{
		{name: "success", args: []string{"call", "--url", url, "echo", "--args", `{"text":"hi"}`, "--wait"}, code: exitOK},
		{name: "task failed", args: []string{"call", "--url", url, "fail", "--args", `{"mode":"error"}`, "--wait"},
			code: exitTaskBad, want: []string{"ended failed"}},
		{name: "tool error", args: []string{"call", "--url", url, "fail", "--args", `{"mode":"tool"}`, "--wait"},
			code: exitTaskBad, want: []string{"tool error"}},
		{name: "call refused by the server", args: []string{"call", "--url", refusing, "echo", "--args", `{"text":"hi"}`},
			code: exitTaskBad, want: []string{"-32602", "window is closed"}},
		{name: "an answer that is not JSON", args: []string{"tools", "--url", garbled.URL},
			code: exitTaskBad, want: []string{"answered, but not in the protocol"}},
		{name: "unknown tool", args: []string{"call", "--url", url, "no_such_tool"},
			code: exitUsage, want: []string{"no tool", "no_such_tool"}},
		{name: "arguments the schema refuses", args: []string{"call", "--url", url, "sleep", "--args", `{"seconds":"x"}`},
			code: exitUsage, want: []string{"seconds", "want number"}},
		{name: "unknown flag", args: []string{"ls", "--bogus"}, code: exitUsage, want: []string{"--bogus"}},
		{name: "a command by another name", args: []string{"show", "nosuchid"}, code: exitUsage,
			want: []string{`unknown command "show"`, `did you mean "get"?`, "taskdeck --help"}},
		{name: "a misspelt command", args: []string{"sevre"}, code: exitUsage, want: []string{`did you mean "serve"?`}},
		{name: "no command near it", args: []string{"frobnicate"}, code: exitUsage,
			want: []string{`unknown command "frobnicate"`, "`taskdeck --help` lists the commands"}},
		{name: "list is ls", args: []string{"list"}, code: exitOK},
		{name: "a word to a command that takes none", args: []string{"ls", "open"}, code: exitUsage,
			want: []string{"`taskdeck ls` takes no arguments", `"open"`, "`taskdeck ls --help`"}},
		{name: "too few arguments", args: []string{"answer", "someid"}, code: exitUsage,
			want: []string{"`taskdeck answer` takes", "ID KEY RESPONSE_JSON", "got 1 argument)"}},
		{name: "a misspelt subcommand", args: []string{"audit", "verfy"}, code: exitUsage,
			want: []string{`did you mean "verify"?`, "`taskdeck audit --help`"}},
		// A group that runs nothing itself printed its help for any word, exit 0.
		{name: "a word a group does not know", args: []string{"notify", "bogus"}, code: exitUsage,
			want: []string{`unknown command "bogus"`, "`taskdeck notify --help`"}},
		{name: "a fragment in --url", args: []string{"call", "--url", "http://127.0.0.1:1/mcp#tok3n", "echo"},
			code: exitUsage, want: []string{"http://127.0.0.1:1/mcp#redacted", "fragment"}},
		{name: "a secret in --url", args: []string{"call", "--url", "http://ops:hunter2@127.0.0.1:1/mcp?token=s3cret", "echo"},
			code: exitUsage, want: []string{"http://redacted@127.0.0.1:1/mcp?redacted", "config file"}},
		{name: "unknown task", args: []string{"get", "nosuchid"}, code: exitUsage, want: []string{"nosuchid", "taskdeck ls"}},
		{name: "dashboard without a terminal", args: nil, code: exitUsage, want: []string{"terminal", "taskdeck ls", "taskdeck watch"}},
		{name: "server refuses connections", args: []string{"call", "--url", refused, "echo"},
			code: exitUnreachable, want: []string{"unreachable", refused}},
		{name: "server never answers", setup: func(_ *testing.T, c *inproc) { c.timeout = 300 * time.Millisecond },
			args: []string{"call", "--url", silent, "echo"}, code: exitUnreachable, want: []string{silent}},
		{name: "store held", setup: func(t *testing.T, c *inproc) {
			st, err := badger.Open(c.dataDir, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
		}, args: []string{"ls"}, code: exitStoreLocked, want: []string{"store", "close it"}},
		{name: "waits for input", args: []string{"call", "--url", url, "approve", "--args", `{"action":"x"}`, "--wait"},
			code: exitWaiting, want: []string{"waits for input", "taskdeck answer"}},
		{name: "store damaged", setup: func(t *testing.T, c *inproc) {
			c.run("call", "--url", url, "echo", "--args", `{"text":"hi"}`).Must(t, exitOK)
			if err := os.WriteFile(filepath.Join(c.dataDir, "MANIFEST"), []byte("not a manifest"), 0o600); err != nil {
				t.Fatal(err)
			}
		}, args: []string{"ls"}, code: exitLocal, want: []string{"is damaged", "move it aside"}},
		{name: "watch timed out", setup: func(t *testing.T, c *inproc) {
			c.run("call", "--url", url, "sleep", "--args", `{"seconds":600}`).Must(t, exitOK)
		}, args: []string{"watch", "--timeout", "300ms"}, code: exitTimedOut, want: []string{"ran out", "1 task still open"}},
		// A timeout that runs out before the feed's first event is still a timeout.
		{name: "watch timed out at once", setup: func(t *testing.T, c *inproc) {
			c.run("call", "--url", url, "sleep", "--args", `{"seconds":600}`).Must(t, exitOK)
		}, args: []string{"watch", "--timeout", "1ms"}, code: exitTimedOut, want: []string{"ran out", "1 task still open"}},
		{name: "call names no server", args: []string{"call", "sleep"}, code: exitUsage, want: []string{"--server NAME", "--url URL"}},
		{name: "call names two servers", args: []string{"call", "--server", "a", "--url", url, "sleep"}, code: exitUsage, want: []string{"name the server once"}},
		{name: "completion for an unknown shell", args: []string{"completion", "tcsh"}, code: exitUsage, want: []string{`unknown shell "tcsh"`, "bash"}},
		{name: "a store of no known kind", args: []string{"--store", "postgre://x", "ls"}, code: exitUsage, want: []string{"postgre://x", "postgres://"}},
		{name: "a misspelt config key", setup: func(t *testing.T, c *inproc) {
			c.writeConfig(`{"mcpServers": {"b": {"url": "https://x.example/mcp", "header": {"A": "b"}}}}`)
		}, args: []string{"servers"}, code: exitUsage, want: []string{`unknown key "header"`, `did you mean "headers"?`}},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			t.Parallel()
			c := newInproc(t)
			if row.setup != nil {
				row.setup(t, c)
			}
			r := c.run(row.args...).Must(t, row.code)
			if row.code == exitOK {
				if r.Stderr != "" {
					t.Fatalf("a success printed on stderr\n%s", r)
				}
				return
			}
			clitest.OneErrorLine(t, r, row.want...)
		})
	}
}

// TestInterruptExits130: ctrl+c on `call --wait` or `watch` stops in one
// line that says the task keeps running and how to follow it, exit 130.
func TestInterruptExits130(t *testing.T) {
	t.Parallel()
	url := demoURL(t)
	interrupt := func(t *testing.T, c *inproc, running string, args ...string) clitest.Result {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var stdout, stderr clitest.SyncBuf
		done := make(chan int, 1)
		full := append([]string{"--data-dir", c.dataDir, "--config", c.config}, args...)
		go func() { done <- c.factory(&stdout, &stderr).Execute(ctx, full) }()
		clitest.WaitFor(t, "the task to be followed", func() bool { return strings.Contains(stdout.String(), running) })
		cancel() // what main's signal context does on SIGINT
		code := <-done
		return clitest.Result{Args: full, Stdout: stdout.String(), Stderr: stderr.String(), Code: code}
	}

	t.Run("call --wait", func(t *testing.T) {
		t.Parallel()
		c := newInproc(t)
		r := interrupt(t, c, "working", "call", "--url", url, "sleep", "--args", `{"seconds":600}`, "--wait").Must(t, exitInterrupted)
		id := strings.Fields(r.Stdout)[1]
		clitest.OneErrorLine(t, r, "stopped following task "+id, "keeps running", "taskdeck watch")
		if st := c.run("get", id, "--json").Must(t, exitOK); !strings.Contains(st.Stdout, `"status":"working"`) {
			t.Fatalf("the interrupted task is not working any more\n%s", st)
		}
	})
	t.Run("call --wait on a stdio server", func(t *testing.T) {
		t.Parallel()
		c := newInproc(t)
		c.writeConfig(fmt.Sprintf(`{"mcpServers":{"local":{"command":%q,"args":["demo-server","--stdio","--speed","0.05"]}}}`, selfBin))
		r := interrupt(t, c, "working", "call", "--server", "local", "sleep", "--args", `{"seconds":600}`, "--wait").Must(t, exitInterrupted)
		clitest.OneErrorLine(t, r, "stopped following task", "stdio server stops with taskdeck, and the task with it")
	})
	t.Run("watch", func(t *testing.T) {
		t.Parallel()
		c := newInproc(t)
		id := strings.TrimSpace(c.run("call", "--url", url, "sleep", "--args", `{"seconds":600}`).Must(t, exitOK).Stdout)
		r := interrupt(t, c, id, "watch").Must(t, exitInterrupted)
		clitest.OneErrorLine(t, r, "stopped following", "keep running", "taskdeck watch")
	})
}

// TestExitCodeOfOtherErrors: a deck error's kind picks its exit code; exit
// 6 sends the operator to the disk, so only the store's own failures get
// it; anything unrecognised is 1.
func TestExitCodeOfOtherErrors(t *testing.T) {
	for _, c := range []struct {
		err  error
		want int
	}{
		{errors.New("something nobody planned for"), exitTaskBad},
		{deck.Errorf(deck.KindFailed, "something nobody planned for"), exitTaskBad},
		{deck.Errorf(deck.KindRefused, "tools/call: internal error"), exitTaskBad},
		{deck.Errorf(deck.KindOwnerGone, "the owner went away"), exitTaskBad},
		{deck.Errorf(deck.KindUsage, "bad"), exitUsage},
		{deck.Errorf(deck.KindNotFound, "no task"), exitUsage},
		{deck.Errorf(deck.KindConflict, "key"), exitUsage},
		{deck.Errorf(deck.KindState, "state"), exitUsage},
		{deck.Errorf(deck.KindNeedsInput, "input"), exitUsage},
		{deck.Errorf(deck.KindUnreachable, "down"), exitUnreachable},
		{deck.Errorf(deck.KindLocked, "held"), exitStoreLocked},
		{fmt.Errorf("store x: %w", deck.Errorf(deck.KindLocal, "no room")), exitLocal},
		{deck.Errorf(deck.KindCanceled, "stopped"), exitInterrupted},
		{fmt.Errorf("waiting: %w", context.Canceled), exitInterrupted},
		{fmt.Errorf("connect: %w", context.DeadlineExceeded), exitUnreachable},
	} {
		if got := exitCode(c.err); got != c.want {
			t.Errorf("exitCode(%v) = %d, want %d", c.err, got, c.want)
		}
	}
}
