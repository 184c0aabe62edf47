package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/taskdeck/taskdeck/internal/clitest"
)

// TestOwnerFollowsConfigEdits: with a dashboard open (the owner), a
// server added to config.json is seen by `taskdeck servers` and by
// `call --server`; every message names the config in use (the owner's,
// also for a command given --config another file); a broken edit is
// refused in one line naming the file, and the next good one is read.
// The dashboard itself lists the new server in its servers view (S), at
// 80×24 and at 200×60.
func TestOwnerFollowsConfigEdits(t *testing.T) {
	for _, size := range [][2]int{{80, 24}, {200, 60}} {
		t.Run(fmt.Sprintf("%dx%d", size[0], size[1]), func(t *testing.T) {
			t.Parallel()
			ownerFollowsConfigEdits(t, size[0], size[1])
		})
	}
}

func ownerFollowsConfigEdits(t *testing.T, width, height int) {
	srv := startDemo(t, "127.0.0.1:0")
	d := newDeck(t) // config.json: {}
	tm := d.dashboard(width, height)
	defer tm.quit()
	clitest.WaitFor(t, "the dashboard to own the store", func() bool {
		_, err := os.Stat(filepath.Join(d.dataDir, "taskdeck.sock"))
		return err == nil
	})

	r := d.run("servers").Must(t, exitOK)
	if strings.TrimSpace(r.Stdout) != "no servers configured in "+d.config {
		t.Fatalf("before the edit, want no servers in %s\n%s", d.config, r)
	}
	other := filepath.Join(t.TempDir(), "other.json")
	if err := os.WriteFile(other, fmt.Appendf(nil, `{"mcpServers":{"elsewhere":{"url":%q}}}`, srv.url), 0o600); err != nil {
		t.Fatal(err)
	}
	r = runTD(t, d.env, "--data-dir", d.dataDir, "--config", other, "servers").Must(t, exitOK)
	if strings.TrimSpace(r.Stdout) != "no servers configured in "+d.config || !strings.Contains(r.Stderr, "--config "+other+" is not used") {
		t.Fatalf("through the owner, want the owner's config named, not %s\n%s", other, r)
	}

	d.writeConfig(fmt.Sprintf(`{"mcpServers":{"builds":{"url":%q}}}`, srv.url))
	r = d.run("servers").Must(t, exitOK)
	if !strings.Contains(r.Stdout, "builds") || strings.Contains(r.Stdout, "no servers") {
		t.Fatalf("after the edit, servers does not list builds\n%s", r)
	}
	r = d.run("call", "--server", "builds", "echo", "--args", `{"text":"after the edit"}`, "--wait").Must(t, exitOK)
	clitest.MustContain(t, r, r.Stdout, "completed")
	tm.keys("S") // the dashboard lists its servers again every few seconds
	tm.waitScreen("builds in the servers view", func(s string) bool {
		if !strings.Contains(s, "BEHIND") {
			return false
		}
		for _, line := range strings.Split(s, "\n") {
			if strings.Contains(line, "builds") && !strings.Contains(line, "echo") {
				return true
			}
		}
		return false
	})
	// Back to the table before any other key: a key within the terminal's
	// escape timeout (50 ms) of the Escape would make the two one alt+key.
	tm.keys("Escape")
	tm.waitScreen("the table again", func(s string) bool { return !strings.Contains(s, "PUSH") })
	if n := srv.stats(t).ToolCalls["echo"]; n != 1 {
		t.Fatalf("the server had %d echo calls, want 1", n)
	}

	d.writeConfig(`{"mcpServers":{"builds":{"url":` + "\n")
	r = d.run("servers").Must(t, exitUsage)
	clitest.OneErrorLine(t, r, d.config, "invalid JSON")
	d.writeConfig(fmt.Sprintf(`{"mcpServers":{"builds":{"url":%q},"deploys":{"url":%q}}}`, srv.url, srv.url))
	r = d.run("servers").Must(t, exitOK)
	clitest.MustContain(t, r, r.Stdout, "builds", "deploys")
}
