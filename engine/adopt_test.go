package engine

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/internal/nodetest"
	mcpconfig "github.com/taskdeck/taskdeck/mcpclient/config"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/notify"
)

// sdkServer is the TypeScript SDK 1.x server of testdata (its own task
// store, tasks/list offered) over stdio, named "sdk".
func sdkServer(t *testing.T) (*mcpconfig.Config, model.ServerRef) {
	t.Helper()
	cfg, err := mcpconfig.ParseConfig("test.json", fmt.Appendf(nil, `{"mcpServers":{"sdk":{"command":"node","args":[%q]}}}`, nodetest.LegacyServers(t).SDKServer()))
	if err != nil {
		t.Fatal(err)
	}
	return cfg, model.ServerRef{Name: "sdk"}
}

// lostCall makes the window a crash leaves, at the Go level (the kill
// point, after the server's CreateTaskResult and before the commit,
// cannot be hit on demand in a child process): an intent committed, its
// tools/call sent to the server on the engine's own session and the
// answer dropped, the intent then orphaned as a restart would.
func lostCall(t *testing.T, e *Engine, ref model.ServerRef, args string) (*model.Task, string) {
	t.Helper()
	rec := model.NewIntent(ref, "wait", json.RawMessage(args), "", time.Now())
	if err := e.store.Create(rec); err != nil {
		t.Fatal(err)
	}
	sess, err := e.pool.Session(ctxT(t), ref)
	if err != nil {
		t.Fatal(err)
	}
	out, err := sess.CallTool(ctxT(t), "wait", json.RawMessage(args), nil, "")
	if err != nil || out.Task == nil {
		t.Fatalf("the lost call: %v %+v", err, out)
	}
	return rec, out.Task.TaskID
}

// A call whose handle was lost between the server's CreateTaskResult and
// the commit is found through tasks/list and adopted: the orphan takes
// the listed task (its handle, the history naming the adoption) and is
// polled to its result. A task another record holds is never taken.
func TestLegacyOrphanAdoptedFromTasksList(t *testing.T) {
	cfg, ref := sdkServer(t)
	e := open(t, t.TempDir(), nil, Options{Config: cfg, RequestTimeout: nodeStart})
	ctx := ctxT(t)
	held, err := e.Call(ctx, deck.CallRequest{Server: ref, Tool: "wait", Args: json.RawMessage(`{"ms":200}`)})
	if err != nil {
		t.Fatal(err)
	}
	rec, taskID := lostCall(t, e, ref, `{"ms":300}`)
	if orphans, err := e.tracker.OrphanStale(); err != nil || len(orphans) != 1 || orphans[0].Status != model.StatusOrphaned {
		t.Fatalf("orphans %+v, %v", orphans, err)
	}
	if err := e.PollNow(ctx, nil); err != nil {
		t.Fatal(err)
	}
	var got *model.Task
	waitFor(t, 30*time.Second, "the adopted task's result", func() bool {
		got, err = e.store.Get(rec.ID)
		return err == nil && got.Status == model.StatusCompleted
	})
	if got.TaskID != taskID || got.TaskID == held.Task.TaskID || !strings.Contains(string(got.Result), "waited") {
		t.Fatalf("adopted %q with %s; want %q (the lost call's) with its result", got.TaskID, got.Result, taskID)
	}
	if !slices.ContainsFunc(got.History, func(tr model.Transition) bool {
		return tr.From == model.StatusOrphaned && tr.Message == model.OrphanAdopted
	}) {
		t.Fatalf("history %+v does not name the adoption", got.History)
	}
}

// Two orphans whose windows both hold the same two listed tasks cannot
// be told apart (the revision's tasks carry no tool or arguments): both
// stay orphaned, as without tasks/list, and the two tasks show as found.
// The operator adopts one (it is polled to its result, the history
// naming who adopted it) and leaves the other, which a second reconcile
// does not offer again; a task a record holds is never found.
func TestLegacyOrphansAmbiguousFoundAdoptedOrLeft(t *testing.T) {
	cfg, ref := sdkServer(t)
	e := open(t, t.TempDir(), nil, Options{Config: cfg, RequestTimeout: nodeStart})
	ctx := ctxT(t)
	held, err := e.Call(ctx, deck.CallRequest{Server: ref, Tool: "wait", Args: json.RawMessage(`{"ms":100}`)})
	if err != nil {
		t.Fatal(err)
	}
	a, ta := lostCall(t, e, ref, `{"ms":100}`)
	b, tb := lostCall(t, e, ref, `{"ms":60000}`)
	if _, err := e.tracker.OrphanStale(); err != nil {
		t.Fatal(err)
	}
	done, err := e.tracker.Reconcile(ctx)
	if err != nil || len(done.Adopted) != 0 {
		t.Fatalf("adopted %d, %v; want none", len(done.Adopted), err)
	}
	for _, id := range []string{a.ID, b.ID} {
		if got, err := e.store.Get(id); err != nil || got.Status != model.StatusOrphaned || got.TaskID != "" {
			t.Fatalf("orphan %s: %+v, %v; want it left orphaned", id, got, err)
		}
	}
	found, err := e.List(ctx, deck.Filter{Statuses: []model.Status{model.StatusFound}})
	if err != nil {
		t.Fatal(err)
	}
	byTask := map[string]*model.Task{}
	for _, en := range found {
		byTask[en.Task.TaskID] = en.Task
	}
	if len(found) != 2 || byTask[ta] == nil || byTask[tb] == nil || byTask[held.Task.TaskID] != nil {
		t.Fatalf("found %d rows %v; want the two lost calls' tasks %s and %s, not the held %s", len(found), slices.Collect(maps.Keys(byTask)), ta, tb, held.Task.TaskID)
	}
	if msg := byTask[tb].StatusMessage; !strings.Contains(msg, "lists this task working") {
		t.Fatalf("found row says %q; want what the server lists", msg)
	}
	if err := e.PollNow(ctx, nil); err != nil { // the watch serve and the dashboard run
		t.Fatal(err)
	}
	alice := deck.WithActor(ctx, model.Actor{Name: "alice", Role: model.RoleOperator})
	adopted, err := e.SettleFound(alice, byTask[ta].ID, true)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the adopted task's result", func() bool {
		adopted, err = e.store.Get(adopted.ID)
		return err == nil && adopted.Status == model.StatusCompleted
	})
	if !strings.Contains(string(adopted.Result), "waited") || !slices.ContainsFunc(adopted.History, func(tr model.Transition) bool {
		return tr.From == model.StatusFound && tr.Message == model.FoundAdopted && tr.By.Name == "alice"
	}) {
		t.Fatalf("adopted %s, history %+v; want its result and alice's adoption", adopted.Result, adopted.History)
	}
	left, err := e.SettleFound(alice, byTask[tb].ID, false)
	if err != nil || left.Status != model.StatusLeft || left.Act.Kind != model.ActLeave || left.Act.Actor.Name != "alice" {
		t.Fatalf("left %+v, %v", left, err)
	}
	if _, err := e.SettleFound(alice, left.ID, true); deck.KindOf(err) != deck.KindState {
		t.Fatalf("adopting a left task: %v; want a state error", err)
	}
	if again, err := e.tracker.Reconcile(ctx); err != nil || len(again.Found) != 0 {
		t.Fatalf("a second reconcile found %d, %v; want none", len(again.Found), err)
	}
}

// A listed task whose call is still in flight (its intent `calling`, the
// task created in its window) is not found: its own answer is on the
// way. Once the intent is orphaned, the task resolves it. Reconciles
// racing each other (two engines of a fleet) record a found task once.
func TestLegacyReconcileSkipsCallsInFlightAndFindsOnce(t *testing.T) {
	cfg, ref := sdkServer(t)
	e := open(t, t.TempDir(), nil, Options{Config: cfg, RequestTimeout: nodeStart})
	ctx := ctxT(t)
	if _, err := e.Call(ctx, deck.CallRequest{Server: ref, Tool: "wait", Args: json.RawMessage(`{"ms":60000}`)}); err != nil {
		t.Fatal(err) // an open record: the server is in use
	}
	rec, taskID := lostCall(t, e, ref, `{"ms":60000}`)
	if done, err := e.tracker.Reconcile(ctx); err != nil || len(done.Found)+len(done.Adopted) != 0 {
		t.Fatalf("with the call in flight: %+v, %v; want nothing found or adopted", done, err)
	}
	// Another client's task, then two reconciles at once.
	sess, err := e.pool.Session(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sess.CallTool(ctx, "wait", json.RawMessage(`{"ms":60000}`), nil, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := e.tracker.OrphanStale(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			if _, err := e.tracker.Reconcile(ctx); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	found, err := e.store.ByStatus(model.StatusFound)
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.store.Get(rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	// The intent's window holds both tasks (the other client's came
	// within it), so the orphan stays orphaned and both show as found,
	// each once.
	if got.Status != model.StatusOrphaned || len(found) != 2 || !slices.ContainsFunc(found, func(f *model.Task) bool { return f.TaskID == taskID }) {
		t.Fatalf("orphan %s %q, found %d; want it orphaned and the two tasks found once each", got.Status, got.TaskID, len(found))
	}
}

// A task reconcile finds is an event (issue 26), committed through the
// outbox with the found row, to an endpoint that names no events (found
// is a default: it waits for a person): the hook is told once, with the
// commands that adopt or leave it; a later reconcile that refreshes the
// row tells nothing again.
func TestLegacyFoundIsAnEvent(t *testing.T) {
	hook, got := eventHook(t)
	cfg, err := mcpconfig.ParseConfig("test.json", fmt.Appendf(nil, `{"mcpServers":{"sdk":{"command":"node","args":[%q]}},"notify":{"commands":[{"argv":[%q,%q]}]}}`,
		nodetest.LegacyServers(t).SDKServer(), hook, got))
	if err != nil {
		t.Fatal(err)
	}
	ref := model.ServerRef{Name: "sdk"}
	e := open(t, t.TempDir(), nil, Options{Config: cfg, RequestTimeout: nodeStart})
	ctx := ctxT(t)
	if _, err := e.Call(ctx, deck.CallRequest{Server: ref, Tool: "wait", Args: json.RawMessage(`{"ms":60000}`)}); err != nil {
		t.Fatal(err) // an open record: the server is in use
	}
	sess, err := e.pool.Session(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	other, err := sess.CallTool(ctx, "wait", json.RawMessage(`{"ms":60000}`), nil, "") // another client's task
	if err != nil || other.Task == nil {
		t.Fatalf("another client's call: %v %+v", err, other)
	}
	done, err := e.tracker.Reconcile(ctx)
	if err != nil || len(done.Found) != 1 {
		t.Fatalf("reconcile: %+v, %v; want the other client's task found", done, err)
	}
	id := done.Found[0]
	waitFor(t, 10*time.Second, "the found event to reach the hook", func() bool {
		return countOf(told(t, got), "task.found", id) > 0
	})
	if _, err := e.tracker.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	var ev notify.Payload
	for _, p := range told(t, got) {
		if p.Type == "task.found" {
			ev = p
		}
	}
	if ev.Data.Task.Status != model.StatusFound || !strings.Contains(ev.Data.Task.StatusMessage, "lists this task working") ||
		ev.Data.Settle != "taskdeck adopt "+id+" (or: taskdeck leave "+id+")" {
		t.Fatalf("found event %+v, task %+v; want the row's status and message, and how to adopt or leave it", ev.Data, ev.Data.Task)
	}
	// Told once: a refresh of the row is no new event. The outbox is
	// empty once the hook has it, so a second event would be pending or told.
	waitFor(t, 10*time.Second, "the outbox to be empty", func() bool {
		st, err := e.notifier.ob.OutboxStats()
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range st {
			if s.Pending > 0 {
				return false
			}
		}
		return true
	})
	if n := countOf(told(t, got), "task.found", id); n != 1 {
		t.Fatalf("the hook was told of the found task %d times, want once", n)
	}
}
