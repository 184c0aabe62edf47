package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/internal/clitest"
	"github.com/taskdeck/taskdeck/internal/hostile"
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

// TestServeTakesOverFromATransientOwner (issue 20, item 6): `serve
// --proxy` started while `watch` owns the store takes it over at once,
// without waiting for watch to exit. A call through watch is mid
// tools/call when serve asks (the server holds its answer): watch's owner
// finishes it (its handle committed) before it lets the store go, so the
// call ends completed with exactly one task on the server, never
// orphaned, and the caller, a `call --wait`, sees it through serve. Watch
// goes on through serve's socket: it prints the end of the task it
// follows. A second serve is refused as before. A SIGKILLed serve:
// watch, now a client, takes the store back and goes on.
func TestServeTakesOverFromATransientOwner(t *testing.T) {
	t.Parallel()
	for _, serveEnd := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		t.Run(serveEnd.String(), func(t *testing.T) {
			t.Parallel()
			srv := hostile.Start(t, demo.Options{Speed: 0.05})
			d := newDeck(t)
			d.writeConfig(fmt.Sprintf(`{"mcpServers":{"build":{"url":%q}},"agents":{"leaver":{"token":"${LEAVER_TOKEN}","servers":["build"]}}}`, srv.URL))
			d.env = append(d.env, "LEAVER_TOKEN="+leaverToken)
			// Two tasks for watch to follow: one to end while serve owns the
			// store, one after serve has ended.
			long := clitest.OnlyID(t, d.run("call", "--server", "build", "sleep", "--args", `{"seconds":3600}`).Must(t, exitOK))
			longer := clitest.OnlyID(t, d.run("call", "--server", "build", "sleep", "--args", `{"seconds":3599}`).Must(t, exitOK))
			gate := srv.HoldAnswer("tools/call")
			t.Cleanup(gate.Release)

			watch := d.start("watch")
			defer watch.kill()
			clitest.WaitFor(t, "watch to own the store", func() bool {
				return strings.Contains(watch.Stdout.String(), "reconciled:") || watch.exited()
			})
			caller := d.start("call", "--server", "build", "sleep", "--args", `{"seconds":1}`, "--wait")
			defer caller.kill()
			clitest.WaitFor(t, "the server to create the call's task", func() bool { return srv.Demo.Stats().TasksCreated == 3 || caller.exited() })

			// A serve whose proxy would refuse to start takes nothing over.
			noToken := slices.DeleteFunc(slices.Clone(d.env), func(v string) bool { return strings.HasPrefix(v, "LEAVER_TOKEN=") })
			clitest.OneErrorLine(t, runTD(t, noToken, d.args([]string{"serve", "--proxy", "127.0.0.1:0"})...).Must(t, exitUsage), "LEAVER_TOKEN")
			owner := d.start("serve", "--proxy", "127.0.0.1:0")
			defer owner.kill()
			clitest.WaitFor(t, "serve to ask watch to hand over", func() bool {
				return strings.Contains(owner.Stderr.String(), "taking ") || owner.exited()
			})
			want := fmt.Sprintf("taskdeck: taking %s over from the dashboard or command (pid %d) that owns it; it goes on through this serve", d.dataDir, watch.cmd.Process.Pid)
			if first := strings.SplitN(owner.Stderr.String(), "\n", 2)[0]; first != want {
				t.Fatalf("serve said:\n%s\nwant its first line: %s", owner.Stderr, want)
			}
			// The call in flight holds the handover; the server answers now.
			gate.Release()
			clitest.WaitFor(t, "serve to serve", func() bool {
				return strings.Contains(owner.Stderr.String(), "taskdeck: serving") || owner.exited()
			})
			if owner.exited() || watch.exited() {
				t.Fatalf("serve exited %v (%d): %s\nwatch exited %v: %s", owner.exited(), owner.Code, owner.Stderr, watch.exited(), watch.Stderr)
			}
			clitest.WaitFor(t, "watch to say serve took over", func() bool {
				return strings.Contains(watch.Stderr.String(), fmt.Sprintf("serve took over %s (pid %d)", d.dataDir, owner.cmd.Process.Pid))
			})
			if n := strings.Count(watch.Stderr.String(), "serve took over"); n != 1 {
				t.Fatalf("watch handed the store over %d times, want once:\n%s", n, watch.Stderr)
			}
			<-caller.done
			if caller.Code != exitOK || !strings.Contains(caller.Stdout.String(), "completed") {
				t.Fatalf("the call through watch across the handover exited %d:\n%s\n%s", caller.Code, caller.Stdout, caller.Stderr)
			}
			if n := gate.Abandoned(); n != 0 {
				t.Fatalf("the owner hung up on the server's answer %d times", n)
			}
			if st := srv.Demo.Stats(); st.TasksCreated != 3 {
				t.Fatalf("the server created %d tasks, want 3 (the two long ones and the call's)", st.TasksCreated)
			}
			got := d.lsByID()
			if len(got) != 3 || got[long].Status != "working" || got[longer].Status != "working" {
				t.Fatalf("ls through serve: %+v", got)
			}
			for id, tk := range got {
				if id != long && id != longer && tk.Status != "completed" {
					t.Fatalf("the call's task %s is %s, want completed", id, tk.Status)
				}
			}
			clitest.OneErrorLine(t, d.run("serve").Must(t, exitStoreLocked), "already serves")
			// Watch goes on through serve: it prints the end of a task it follows.
			seen := len(watch.Stdout.String())
			d.run("cancel", long).Must(t, exitOK)
			clitest.WaitFor(t, "watch to print the cancel made through serve", func() bool {
				return strings.Contains(watch.Stdout.String()[seen:], long) || watch.exited()
			})

			if serveEnd == syscall.SIGKILL {
				owner.kill()
			} else {
				owner.cmd.Process.Signal(syscall.SIGTERM)
				<-owner.done
				if owner.Code != exitOK {
					t.Fatalf("serve exited %d after SIGTERM: %s", owner.Code, owner.Stderr)
				}
			}
			// Watch takes the store back (or a command owns it in turn), and
			// prints the end of the other task it follows.
			seen = len(watch.Stdout.String())
			d.run("cancel", longer).Must(t, exitOK)
			<-watch.done
			if watch.Code != exitOK || !strings.Contains(watch.Stdout.String()[seen:], longer) {
				t.Fatalf("watch exited %d; after serve ended it printed:\n%s\nstderr:\n%s", watch.Code, watch.Stdout.String()[seen:], watch.Stderr)
			}
		})
	}
}

// TestDashboardHandsOverToServe (issue 20, item 6): `serve` started while
// the dashboard owns the store takes it over at once; the dashboard says
// so on its status line and keeps its place (the selected row, its mark),
// and its table goes on changing through serve's feed.
func TestDashboardHandsOverToServe(t *testing.T) {
	t.Parallel()
	d, _ := tuiDeck(t)
	long := d.call("sleep", `{"seconds":3600}`)
	d.call("echo", `{"text":"before"}`)
	tm := d.dashboard(120, 30)
	tm.waitScreen("both rows", func(s string) bool { return len(tableRows(s)) == 2 })
	tm.selectRow("sleep")
	tm.keys("Space")
	tm.waitText("1 marked")

	// The status line says so for 5 s, from before serve says it serves
	// (serve's reconcile report, which comes right after, beside it).
	owner := d.start("serve")
	defer owner.kill()
	s := tm.waitText(fmt.Sprintf("serve took over (pid %d)", owner.cmd.Process.Pid))
	if selectedTool(s) != "sleep" || !strings.Contains(s, "1 marked") {
		t.Fatalf("the dashboard lost its place across the handover:\n%s", s)
	}
	d.run("cancel", long).Must(t, exitOK)
	tm.waitScreen("the sleep row cancelled through serve", func(s string) bool { return oneRow(s, "sleep") == "cancelled" })
	d.call("echo", `{"text":"after"}`)
	tm.waitScreen("the new row", func(s string) bool { return len(tableRows(s)) == 3 })
	tm.quit()
	if owner.exited() {
		t.Fatalf("serve ended with the dashboard: exit %d, %s", owner.Code, owner.Stderr.String())
	}
}
