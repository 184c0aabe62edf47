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
	"github.com/taskdeck/taskdeck/internal/hostile"
	mcpconfig "github.com/taskdeck/taskdeck/mcpclient/config"
	"github.com/taskdeck/taskdeck/notify"
)

// A server whose polls all fail (its front answers 502, as a gateway in
// front of a stopped server does) is told once to the endpoint that wants
// polls_failing, once the rule's polls and time have passed, and once more
// when its polls are answered again; an endpoint that wants only task
// events is told of neither.
func TestPollsFailingToldOncePerEpisode(t *testing.T) {
	srv := startDemo(t, demo.Options{NoPush: true})
	dir := t.TempDir()
	got, other := filepath.Join(dir, "events"), filepath.Join(dir, "other")
	hook := filepath.Join(dir, "hook.sh")
	if err := os.WriteFile(hook, []byte("#!/bin/sh\ncat >> \"$1\"\necho >> \"$1\"\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	cfg, err := mcpconfig.ParseConfig("test.json", fmt.Appendf(nil, `{"mcpServers":{"demo":{"url":%q}},
		"notify":{"pollsFailing":{"polls":3,"after":"300ms"},"commands":[
			{"argv":[%q,%q],"events":["polls_failing"]},
			{"argv":[%q,%q],"events":["failed"]}]}}`, srv.URL, hook, got, hook, other))
	if err != nil {
		t.Fatal(err)
	}
	e := open(t, t.TempDir(), srv, Options{Config: cfg})
	ctx := ctxT(t)
	res, err := e.Call(ctx, deck.CallRequest{Server: demoRef, Tool: "sleep", Args: json.RawMessage(`{"seconds":2000}`)})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.PollNow(ctx, nil); err != nil {
		t.Fatal(err)
	}
	events := func() []notify.Payload {
		b, _ := os.ReadFile(got)
		var out []notify.Payload
		for line := range strings.Lines(string(b)) {
			var p notify.Payload
			if strings.TrimSpace(line) != "" {
				if err := json.Unmarshal([]byte(line), &p); err != nil {
					t.Fatalf("the hook got %q: %v", line, err)
				}
				out = append(out, p)
			}
		}
		return out
	}
	waitFor(t, 10*time.Second, "a poll of the sleeping task", func() bool {
		en, err := e.Get(ctx, res.Task.ID)
		return err == nil && !en.Poll.LastPolled.IsZero() && en.Poll.Errors == 0
	})

	srv.On("tasks/get", hostile.HTTPStatus(502))
	waitFor(t, 20*time.Second, "polls_failing told", func() bool { return len(events()) > 0 })
	failing := events()[0]
	if s := failing.Data.Server; failing.Type != "server.polls_failing" || s == nil || s.Name != "demo" || s.FailedPolls < 3 ||
		failing.Timestamp.Sub(s.Since) < 300*time.Millisecond-time.Millisecond || !strings.Contains(s.LastError, "502") ||
		failing.Data.Show != "taskdeck doctor demo" || failing.Data.Task != nil {
		t.Fatalf("the polls_failing event: %+v (server %+v); want demo's, after 3 failed polls over 300ms, naming the 502", failing, failing.Data.Server)
	}
	// Polls go on failing: nothing more is told until one is answered.
	failedBefore := len(srv.Requests("tasks/get"))
	waitFor(t, 10*time.Second, "three more failed polls", func() bool { return len(srv.Requests("tasks/get")) >= failedBefore+3 })

	srv.On("tasks/get", nil)
	waitFor(t, 20*time.Second, "polls_recovered told", func() bool { return len(events()) > 1 })
	all := events()
	if len(all) != 2 || all[1].Type != "server.polls_recovered" || all[1].Data.Server.RecoveredAt.IsZero() ||
		!all[1].Data.Server.Since.Equal(failing.Data.Server.Since) {
		t.Fatalf("the hook was told %d events, the second %+v; want polls_failing once, then polls_recovered of the same episode", len(all), all[len(all)-1])
	}
	eps, err := e.NotifyStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, ep := range eps {
		if ep.Events[0] == "failed" && (ep.Delivered != 0 || ep.Pending != 0) {
			t.Errorf("the endpoint that wants only failed tasks was given %+v", ep)
		}
	}
	if b, err := os.ReadFile(other); err == nil {
		t.Errorf("the endpoint that wants only failed tasks was told: %s", b)
	}
}
