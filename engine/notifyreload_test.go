package engine

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/demo"
	mcpconfig "github.com/taskdeck/taskdeck/mcpclient/config"
	"github.com/taskdeck/taskdeck/model"
)

// An owner that follows its config picks up an edit of "notify" without
// a restart (issue 27): a command hook added is told of the next task
// that completes, and notify status lists it; the hook removed again is
// told of nothing more (no event is committed for it) and shows as no
// longer configured. An edit whose secret is unset is refused and leaves
// the endpoints in use.
func TestFollowConfigReloadsNotify(t *testing.T) {
	srv := startDemo(t, demo.Options{})
	dir := t.TempDir()
	path := filepath.Join(dir, "config.json")
	got := filepath.Join(dir, "events")
	hook := filepath.Join(dir, "hook.sh")
	if err := os.WriteFile(hook, []byte("#!/bin/sh\ncat >> \"$1\"\necho >> \"$1\"\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	write := func(notify string) {
		t.Helper()
		if err := os.WriteFile(path, fmt.Appendf(nil, `{"mcpServers":{"demo":{"url":%q}}%s}`, srv.URL, notify), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("")
	cfg, err := mcpconfig.LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	e := open(t, t.TempDir(), srv, Options{Config: cfg, FollowConfig: true})
	ctx := ctxT(t)
	complete := func() string {
		t.Helper()
		res, err := e.Call(ctx, deck.CallRequest{Server: demoRef, Tool: "echo", Args: json.RawMessage(`{"text":"x"}`)})
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, "the echo task to complete", func() bool {
			en, err := e.Get(ctx, res.Task.ID)
			return err == nil && en.Task.Status == model.StatusCompleted
		})
		return res.Task.ID
	}
	status := func() []deck.NotifyEndpoint {
		t.Helper()
		eps, err := e.NotifyStatus(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return eps
	}
	complete()
	if eps := status(); len(eps) != 0 {
		t.Fatalf("notify status with no endpoint configured: %+v", eps)
	}

	write(fmt.Sprintf(`,"notify":{"commands":[{"argv":[%q,%q],"events":["completed"]}]}`, hook, got))
	if eps := status(); len(eps) != 1 || eps[0].Kind != "command" || eps[0].Target != hook {
		t.Fatalf("notify status after the edit: %+v; want the hook added", eps)
	}
	id := complete()
	waitFor(t, 10*time.Second, "the hook added by the edit to be told", func() bool {
		b, _ := os.ReadFile(got)
		return strings.Contains(string(b), id)
	})
	waitFor(t, 10*time.Second, "the delivery to be counted", func() bool {
		eps := status()
		return len(eps) == 1 && eps[0].Delivered == 1 && eps[0].Pending == 0
	})

	write("")
	again := complete()
	eps := status()
	if len(eps) != 1 || eps[0].Kind != "" || eps[0].Pending != 0 || eps[0].Delivered != 1 {
		t.Fatalf("notify status after the hook was removed and task %s completed: %+v; want it no longer configured, nothing pending", again, eps)
	}
	if b, _ := os.ReadFile(got); strings.Count(string(b), `"task.completed"`) != 1 {
		t.Fatalf("the hook was told of %d completions, want the one while it was configured:\n%s", strings.Count(string(b), `"task.completed"`), b)
	}

	write(`,"notify":{"webhooks":[{"url":"http://127.0.0.1:9/td","secret":"${TASKDECK_TEST_UNSET_SECRET}"}]}`)
	if eps := status(); len(eps) != 1 || eps[0].Kind != "" {
		t.Fatalf("notify status after an edit with its secret unset: %+v; want the version in use (no endpoint)", eps)
	}
}
