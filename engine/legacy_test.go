package engine

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/internal/nodetest"
	"github.com/taskdeck/taskdeck/internal/waitfor"
	mcpconfig "github.com/taskdeck/taskdeck/mcpclient/config"
	"github.com/taskdeck/taskdeck/model"
)

// nodeStart bounds connecting to a Node.js server, whose start (a
// stdio server's, at the first connect) takes seconds on a busy machine.
var nodeStart = waitfor.Scale(30 * time.Second)

// everything is the reference 2025-11-25 server (server-everything from
// npm, testdata of mcpclient) over stdio, named "everything".
func everything(t *testing.T) (*mcpconfig.Config, model.ServerRef) {
	t.Helper()
	entry := nodetest.LegacyServers(t).Everything()
	cfg, err := mcpconfig.ParseConfig("test.json", fmt.Appendf(nil, `{"mcpServers":{"everything":{"command":"node","args":[%q,"stdio"]}}}`, entry))
	if err != nil {
		t.Fatal(err)
	}
	return cfg, model.ServerRef{Name: "everything"}
}

// A task on the 2025-11-25 wire is tracked like any other: its handle
// committed before Call returns, the record saying the revision, the
// server's question (its elicitation/create on tasks/result) on the
// record, answered through the engine, and the result fetched at the end;
// and a second task cancelled.
func TestLegacyTaskLikeAnyOther(t *testing.T) {
	cfg, ref := everything(t)
	e := open(t, t.TempDir(), nil, Options{Config: cfg, RequestTimeout: nodeStart})
	ctx := ctxT(t)
	if err := e.PollNow(ctx, nil); err != nil { // the engine's watch
		t.Fatal(err)
	}
	res, err := e.Call(ctx, deck.CallRequest{Server: ref, Tool: "simulate-research-query", Args: json.RawMessage(`{"topic":"python","ambiguous":true}`)})
	if err != nil {
		t.Fatal(err)
	}
	id := res.Task.ID
	stored, err := e.store.Get(id)
	if err != nil || stored.TaskID == "" || stored.Protocol != "2025-11-25" {
		t.Fatalf("stored %+v, %v: want the handle committed, saying 2025-11-25", stored, err)
	}
	var rec *model.Task
	waitFor(t, 30*time.Second, "the server's question on the record", func() bool {
		rec, err = e.store.Get(id)
		return err == nil && rec.Status == model.StatusInputRequired && len(rec.InputRequests) > 0
	})
	answers := map[string]json.RawMessage{}
	for key, r := range rec.InputRequests {
		if r.Method != "elicitation/create" || !strings.Contains(string(r.Params), "Python snake species") {
			t.Fatalf("question %s: %s %s", key, r.Method, r.Params)
		}
		answers[key] = json.RawMessage(`{"action":"accept","content":{"interpretation":"snake"}}`)
	}
	if _, err := e.Answer(ctx, id, answers); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the end", func() bool {
		rec, err = e.store.Get(id)
		return err == nil && rec.Status.Terminal()
	})
	if rec.Status != model.StatusCompleted || !strings.Contains(string(rec.Result), "Clarification**: snake") {
		t.Fatalf("ended %s with %.300s; want completed with the answer in the report", rec.Status, rec.Result)
	}

	res, err = e.Call(ctx, deck.CallRequest{Server: ref, Tool: "simulate-research-query", Args: json.RawMessage(`{"topic":"tides"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Cancel(ctx, res.Task.ID); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the cancel", func() bool {
		rec, err = e.store.Get(res.Task.ID)
		return err == nil && rec.Status.Terminal()
	})
	if rec.Status != model.StatusCancelled {
		t.Fatalf("after cancel: %s (%s)", rec.Status, rec.StatusMessage)
	}
}

// taskdeck restarted while a task of a server that binds tasks to their
// session runs (server-everything over HTTP): the new session cannot see
// it, and the record ends unknown saying so, not "expired".
func TestLegacySessionBoundTaskAfterRestart(t *testing.T) {
	url, _ := nodetest.LegacyServers(t).ServeEverything(t, "0")
	cfg, err := mcpconfig.ParseConfig("test.json", fmt.Appendf(nil, `{"mcpServers":{"everything":{"url":%q}}}`, url))
	if err != nil {
		t.Fatal(err)
	}
	ref := model.ServerRef{Name: "everything"}
	dir := t.TempDir()
	ctx := ctxT(t)
	first := open(t, dir, nil, Options{Config: cfg, RequestTimeout: nodeStart})
	res, err := first.Call(ctx, deck.CallRequest{Server: ref, Tool: "simulate-research-query", Args: json.RawMessage(`{"topic":"tides"}`)})
	if err != nil || res.Task.TaskID == "" {
		t.Fatalf("call: %v", err)
	}
	first.Close()

	second := open(t, dir, nil, Options{Config: cfg, RequestTimeout: nodeStart})
	if err := second.PollNow(ctx, nil); err != nil {
		t.Fatal(err)
	}
	var rec *model.Task
	waitFor(t, 30*time.Second, "the record to end", func() bool {
		rec, err = second.store.Get(res.Task.ID)
		return err == nil && rec.Status.Terminal()
	})
	if rec.Status != model.StatusUnknown || !strings.Contains(rec.StatusMessage, "binds tasks to the session that made them") {
		t.Fatalf("after the restart: %s %q", rec.Status, rec.StatusMessage)
	}
}
