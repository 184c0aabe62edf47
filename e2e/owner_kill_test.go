package e2e

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/internal/clitest"
	"github.com/taskdeck/taskdeck/internal/hostile"
	"github.com/taskdeck/taskdeck/internal/waitfor"
)

// TestOwnerKilledWhileClientsAreMidCall: the owner (`taskdeck serve`) is
// killed with SIGKILL while three commands' calls are on the server,
// which has created their tasks and not yet answered. Every task the
// server created has a record (a handle, or an intent turned orphaned),
// each command ends with its record's id (a command with a key always:
// it is sent again) or one error line, and the next command works on the
// store within 2 s of the kill (scaled): a bound on the processes' start
// and the store's open, which no fixed figure holds at any load; below
// the 10 s after which a command gives up on a store held but not served.
func TestOwnerKilledWhileClientsAreMidCall(t *testing.T) {
	t.Parallel()
	srv := hostile.Start(t, demo.Options{Speed: 0.05})
	srv.Withhold("tools/call")
	d := newDeck(t)
	d.writeConfig(fmt.Sprintf(`{"mcpServers":{"demo":{"url":%q}}}`, srv.URL))
	owner := d.serve()

	// Two with a key (retried through the next owner: the key names the
	// record), one without (not retried: it may have been sent).
	keys := []string{"mid-1", "mid-2", ""}
	var clients []*proc
	for _, k := range keys {
		args := []string{"call", "--server", "demo", "sleep", "--args", `{"seconds":600}`}
		if k != "" {
			args = append(args, "--key", k)
		}
		clients = append(clients, d.start(args...))
	}
	clitest.WaitFor(t, "the server to create the three tasks", func() bool { return srv.Demo.Stats().TasksCreated == 3 })

	owner.cmd.Process.Signal(syscall.SIGKILL)
	killed := time.Now()
	<-owner.done
	srv.On("tools/call", nil)
	r := d.run("ls", "--json")
	took := time.Since(killed)
	if r.Code != exitOK {
		t.Fatalf("the first command after the kill:\n%s", r)
	}
	t.Logf("the next command (ls) done %v after the owner's SIGKILL", took.Round(time.Millisecond))
	if bound := waitfor.Scale(2 * time.Second); took > bound {
		t.Errorf("the next command took %v after the kill, want within %v (2 s, scaled for a busy machine)", took, bound)
	}

	for i, c := range clients {
		select {
		case <-c.done:
		case <-time.After(clitest.CmdTimeout):
			t.Fatalf("client %d still running %s after the kill", i, clitest.CmdTimeout)
		}
		res := clitest.Result{Args: c.cmd.Args, Stdout: c.Stdout.String(), Stderr: c.Stderr.String(), Code: c.Code}
		for _, bad := range []string{"panic", "goroutine "} {
			if strings.Contains(res.Stderr, bad) {
				t.Fatalf("client %d: a trace\n%s", i, res)
			}
		}
		switch {
		case keys[i] != "":
			// Sent again through the next owner, the key names the
			// record the first send left.
			res.Must(t, exitOK)
			clitest.OnlyID(t, res)
		case c.Code == exitOK:
			clitest.OnlyID(t, res)
		default:
			clitest.OneErrorLine(t, res)
		}
		t.Logf("client %d (key %q): exit %d, stdout %q, stderr %q", i, keys[i], c.Code, strings.TrimSpace(res.Stdout), strings.TrimSpace(res.Stderr))
	}

	// Every task the server created is accounted for: by its handle, or
	// by an orphaned intent (the call went out, its answer never came).
	tasks := d.ls()
	handles, orphans := map[string]bool{}, 0
	for _, tk := range tasks {
		switch {
		case tk.TaskID != "":
			handles[tk.TaskID] = true
		case tk.Status == "orphaned" || tk.Status == "calling":
			orphans++
		}
	}
	unmatched := 0
	for _, id := range srv.Demo.Stats().TaskIDs {
		if !handles[id] {
			unmatched++
		}
	}
	if unmatched > orphans {
		t.Fatalf("the server created %d tasks; %d have no handle and there are %d orphaned intents: %+v", len(srv.Demo.Stats().TaskIDs), unmatched, orphans, tasks)
	}
	if n := srv.Demo.Stats().TasksCreated; n != 3 {
		t.Fatalf("the server created %d tasks, want 3: a call was sent again", n)
	}
}
