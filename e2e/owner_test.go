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
