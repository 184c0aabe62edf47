package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/internal/clitest"
)

// serve starts `taskdeck serve` on the deck and waits until it serves.
func (d *deck) serve() *proc {
	d.t.Helper()
	p := d.start("serve")
	clitest.WaitFor(d.t, "serve to say it serves", func() bool {
		return strings.Contains(p.Stderr.String(), "taskdeck: serving") || p.exited()
	})
	if p.exited() {
		d.t.Fatalf("serve exited %d: %s", p.Code, p.Stderr.String())
	}
	return p
}

// TestServeIsALongLivedOwner: `taskdeck serve` owns the store; commands
// and the dashboard work through it (no exit 4), a second serve is
// refused with exit 4, SIGTERM ends it with exit 0 within a few seconds,
// and the next command owns the store.
func TestServeIsALongLivedOwner(t *testing.T) {
	t.Parallel()
	d, srv := tuiDeck(t)
	owner := d.serve()

	second := d.run("serve").Must(t, exitStoreLocked)
	clitest.OneErrorLine(t, second, "already serves")

	tm := d.dashboard(100, 30)
	r := d.run("call", "--server", "demo", "echo", "--args", `{"text":"through the owner"}`, "--wait").Must(t, exitOK)
	if !strings.Contains(r.Stdout, "completed") {
		t.Fatalf("call --wait through serve did not complete\n%s", r)
	}
	tm.waitScreen("the echo row completed on the dashboard", func(s string) bool { return oneRow(s, "echo") == "completed" })
	ls := d.ls()
	if len(ls) != 1 || ls[0].Status != "completed" {
		t.Fatalf("ls through serve: %+v", ls)
	}
	tm.quit()
	if owner.exited() {
		t.Fatalf("serve ended with the dashboard: exit %d, %s", owner.Code, owner.Stderr.String())
	}

	start := time.Now()
	owner.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-owner.done:
	case <-time.After(stopGrace):
		t.Fatalf("serve did not exit within %s of SIGTERM", stopGrace)
	}
	took := time.Since(start)
	if owner.Code != 0 {
		t.Fatalf("serve exited %d after SIGTERM, want 0: %s", owner.Code, owner.Stderr.String())
	}
	if _, err := os.Lstat(filepath.Join(d.dataDir, "taskdeck.sock")); !os.IsNotExist(err) {
		t.Fatalf("the socket is still there after serve exited: %v", err)
	}
	d.run("call", "--server", "demo", "echo", "--args", `{"text":"after"}`).Must(t, exitOK)
	if n := len(d.ls()); n != 2 {
		t.Fatalf("%d records after serve, want 2", n)
	}
	if n := srv.stats(t).ToolCalls["echo"]; n != 2 {
		t.Fatalf("the server had %d echo calls, want 2", n)
	}
	t.Logf("serve exited %v after SIGTERM", took)
}

// TestAnotherOwnersConfigIsNamed: a command given --config that works
// through an owner started with another config resolves server names in
// the owner's config (a name only the owner's has included); it says so
// once, in one line on stderr. With the owner's own config, or without
// --config, it says nothing.
func TestAnotherOwnersConfigIsNamed(t *testing.T) {
	t.Parallel()
	d, ownerSrv := tuiDeck(t)
	owner := d.serve()
	defer owner.kill()

	other := startDemo(t, "127.0.0.1:0")
	otherConfig := filepath.Join(t.TempDir(), "other.json")
	if err := os.WriteFile(otherConfig, fmt.Appendf(nil, `{"mcpServers":{"demo":{"url":%q}}}`, other.url), 0o600); err != nil {
		t.Fatal(err)
	}
	r := runTD(t, d.env, "--data-dir", d.dataDir, "--config", otherConfig, "call", "--server", "demo", "echo", "--args", `{"text":"x"}`).Must(t, exitOK)
	if n := strings.Count(r.Stderr, "\n"); n != 1 || !strings.Contains(r.Stderr, "taskdeck: warning: --config "+otherConfig+" is not used") || !strings.Contains(r.Stderr, d.config) {
		t.Fatalf("want one warning line naming both configs\n%s", r)
	}
	if n := ownerSrv.stats(t).ToolCalls["echo"]; n != 1 {
		t.Fatalf("the owner's server had %d echo calls, want 1: the call goes by the owner's config", n)
	}
	if n := other.stats(t).ToolCalls["echo"]; n != 0 {
		t.Fatalf("the other config's server had %d echo calls, want 0", n)
	}

	// A name only the owner's config has: the owner resolves it.
	empty := filepath.Join(t.TempDir(), "empty.json")
	if err := os.WriteFile(empty, []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r = runTD(t, d.env, "--data-dir", d.dataDir, "--config", empty, "call", "--server", "demo", "echo", "--args", `{"text":"y"}`).Must(t, exitOK)
	clitest.MustContain(t, r, r.Stderr, "--config "+empty+" is not used")
	if n := ownerSrv.stats(t).ToolCalls["echo"]; n != 2 {
		t.Fatalf("the owner's server had %d echo calls, want 2", n)
	}
	// A name no config has: refused by the owner, in one line.
	r = runTD(t, d.env, "--data-dir", d.dataDir, "--config", empty, "call", "--server", "nope", "echo").Must(t, exitUsage)
	if !strings.Contains(r.Stderr, "nope") {
		t.Fatalf("the refusal should name the server\n%s", r)
	}

	if r := d.run("ls"); r.Code != exitOK || r.Stderr != "" {
		t.Fatalf("with the owner's own config, want no warning\n%s", r)
	}
	if r := runTD(t, d.env, "--data-dir", d.dataDir, "ls"); r.Code != exitOK || r.Stderr != "" {
		t.Fatalf("without --config, want no warning\n%s", r)
	}
}

// TestServeTakesOverFromATransientOwner (issue 20, item 6): serve started
// while `watch` owns the store was refused with exit 4. Now it says in one
// line that it waits, and once the watcher is stopped at its pid (by
// SIGTERM, or SIGKILL leaving the socket file behind) it owns the store
// and serves: the commands work through it, on the task the watcher
// followed and on a new one.
func TestServeTakesOverFromATransientOwner(t *testing.T) {
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			d, _ := tuiDeck(t)
			id := d.call("sleep", `{"seconds":600}`)
			watch := d.start("watch")
			clitest.WaitFor(t, "watch to own the store", func() bool {
				return strings.Contains(watch.Stdout.String(), "reconciled:") || watch.exited()
			})
			owner := d.start("serve")
			clitest.WaitFor(t, "serve to say it waits", func() bool {
				return strings.Contains(owner.Stderr.String(), "waiting for") || owner.exited()
			})
			if owner.exited() || watch.exited() {
				t.Fatalf("serve exited %d: %s; watch exited %v", owner.Code, owner.Stderr, watch.exited())
			}
			if err := watch.cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			<-watch.done
			clitest.WaitFor(t, "serve to serve", func() bool {
				return strings.Contains(owner.Stderr.String(), "taskdeck: serving") || owner.exited()
			})
			if owner.exited() {
				t.Fatalf("serve exited %d: %s", owner.Code, owner.Stderr)
			}
			lines := strings.Split(strings.TrimSpace(owner.Stderr.String()), "\n")
			want := fmt.Sprintf("taskdeck: waiting for %s: a dashboard or command (pid %d) owns it; serving once it exits", d.dataDir, watch.cmd.Process.Pid)
			if len(lines) != 2 || lines[0] != want {
				t.Fatalf("serve said:\n%s\nwant its first line: %s", owner.Stderr, want)
			}
			d.run("cancel", id).Must(t, exitOK)
			r := d.run("call", "--server", "demo", "echo", "--args", `{"text":"through serve"}`, "--wait").Must(t, exitOK)
			if !strings.Contains(r.Stdout, "completed") {
				t.Fatalf("call --wait through serve did not complete\n%s", r)
			}
			got := d.lsByID()
			if len(got) != 2 || got[id].Status != "cancelled" {
				t.Fatalf("ls through serve: %+v", got)
			}
			if owner.exited() {
				t.Fatalf("serve exited %d: %s", owner.Code, owner.Stderr)
			}
		})
	}
}
