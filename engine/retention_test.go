package engine

import (
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/internal/pgtest"
	mcpconfig "github.com/taskdeck/taskdeck/mcpclient/config"
	"github.com/taskdeck/taskdeck/model"
)

// An owner with "retention": {"finished": "1m"} prunes the finished
// tasks not changed for a minute, by its clock, and keeps the younger
// ones and the open ones; Servers reports the schedule, who runs it, and
// its last run. An engine without Options.Retention prunes nothing and
// says that nothing running prunes.
func TestRetentionPrunesFinishedTasks(t *testing.T) {
	srv := startDemo(t, demo.Options{})
	cfg, err := mcpconfig.ParseConfig("test.json", fmt.Appendf(nil, `{"mcpServers":{"demo":{"url":%q}},"retention":{"finished":"1m"}}`, srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	var skew atomic.Int64
	now := func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	e := open(t, t.TempDir(), srv, Options{Config: cfg, Retention: true, Now: now, retentionEvery: 20 * time.Millisecond})
	ctx := ctxT(t)
	call := func(tool, args string) *model.Task {
		t.Helper()
		res, err := e.Call(ctx, deck.CallRequest{Server: model.ServerRef{Name: "demo"}, Tool: tool, Args: json.RawMessage(args)})
		if err != nil {
			t.Fatal(err)
		}
		return res.Task
	}
	old := call("echo", `{"text":"old"}`)
	running := call("sleep", `{"seconds":600}`)
	if err := e.PollNow(ctx, nil); err != nil { // the owner's loop, and the schedule with it
		t.Fatal(err)
	}
	skew.Store(int64(2 * time.Minute))
	young := call("echo", `{"text":"young"}`)
	// The run is reported once its prune has committed: wait for both.
	waitFor(t, 10*time.Second, "the old finished task pruned and the run reported", func() bool {
		_, err := e.Get(ctx, old.ID)
		servers, serr := e.Servers(ctx)
		return deck.KindOf(err) == deck.KindNotFound && serr == nil && len(servers) == 1 &&
			servers[0].Retention != nil && !servers[0].Retention.LastRun.IsZero()
	})
	for _, id := range []string{running.ID, young.ID} {
		if _, err := e.Get(ctx, id); err != nil {
			t.Fatalf("task %s was pruned: %v", id, err)
		}
	}
	servers, err := e.Servers(ctx)
	if err != nil || len(servers) != 1 || servers[0].Retention == nil {
		t.Fatalf("Servers = %+v, %v; want the retention", servers, err)
	}
	if r := servers[0].Retention; r.Finished != "1m0s" || r.Runner != "this engine" || r.LastRun.IsZero() || r.LastError != "" {
		t.Fatalf("retention = %+v", r)
	}

	quiet := open(t, t.TempDir(), srv, Options{Config: cfg})
	servers, err = quiet.Servers(ctx)
	if err != nil || servers[0].Retention == nil || servers[0].Retention.Runner != "" || !servers[0].Retention.LastRun.IsZero() {
		t.Fatalf("an engine that does not run the schedule reports %+v, %v", servers[0].Retention, err)
	}
}

// On a PostgreSQL fleet two engines that both run the schedule agree on
// one runner: its Servers says "this engine", the other's names it; the
// old finished task is pruned once (one prune in the audit log).
func TestRetentionOnFleetOneRunner(t *testing.T) {
	srv := startDemo(t, demo.Options{})
	db := pgtest.DB(t)
	var skew atomic.Int64
	now := func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	var es []*Engine
	for i := range 2 {
		cfg, err := mcpconfig.ParseConfig("test.json", fmt.Appendf(nil, `{"mcpServers":{"demo":{"url":%q}},"retention":{"finished":"1m"}}`, fmt.Sprintf("%s?engine=%d", srv.URL, i)))
		if err != nil {
			t.Fatal(err)
		}
		e := open(t, t.TempDir(), srv, Options{Store: db, Claim: true, Config: cfg, ClaimLease: testLease, ClaimRenew: testRenew,
			Retention: true, Now: now, retentionEvery: 20 * time.Millisecond})
		if err := e.PollNow(ctxT(t), nil); err != nil { // the loop, and the schedule with it
			t.Fatal(err)
		}
		es = append(es, e)
	}
	ctx := ctxT(t)
	res, err := es[0].Call(ctx, deck.CallRequest{Server: model.ServerRef{Name: "demo"}, Tool: "echo", Args: json.RawMessage(`{"text":"old"}`)})
	if err != nil {
		t.Fatal(err)
	}
	old := res.Task
	retention := func(e *Engine) deck.Retention {
		servers, err := e.Servers(ctx)
		if err != nil || len(servers) != 1 || servers[0].Retention == nil {
			t.Fatalf("Servers = %+v, %v; want the retention", servers, err)
		}
		return *servers[0].Retention
	}
	// runner is the engine the fleet agrees prunes, by both engines' Servers; -1 while they do not agree.
	runner := func() int {
		a, b := retention(es[0]).Runner, retention(es[1]).Runner
		switch {
		case a == "this engine" && b == es[0].claims.Name():
			return 0
		case b == "this engine" && a == es[1].claims.Name():
			return 1
		}
		return -1
	}
	waitFor(t, 30*time.Second, "both engines name the same runner", func() bool { return runner() >= 0 })

	skew.Store(int64(2 * time.Minute)) // the task is now two minutes old to both
	waitFor(t, 30*time.Second, "the old finished task pruned", func() bool {
		_, err := es[1].Get(ctx, old.ID)
		return deck.KindOf(err) == deck.KindNotFound
	})
	// Still one runner, named alike by both, after the run that pruned.
	waitFor(t, 30*time.Second, "both engines still name the same runner", func() bool { return runner() >= 0 })
	log, err := es[0].Audit(ctx, model.AuditFilter{Task: old.ID})
	if err != nil {
		t.Fatal(err)
	}
	prunes := 0
	for _, a := range log.Entries {
		if a.Act == model.ActPrune {
			prunes++
		}
	}
	if prunes != 1 {
		t.Fatalf("the old task's audit log has %d prunes, want 1: %+v", prunes, log.Entries)
	}
}
