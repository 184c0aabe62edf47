package engine

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/internal/waitfor"
	mcpconfig "github.com/taskdeck/taskdeck/mcpclient/config"
	"github.com/taskdeck/taskdeck/model"
)

// launch starts n sleeps that outlast the test, from several goroutines.
func launch(t *testing.T, e *Engine, n int) []string {
	t.Helper()
	ctx := ctxT(t)
	ids := make([]string, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	const workers = 16
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				res, err := e.Call(ctx, deck.CallRequest{Server: demoRef, Tool: "sleep", Args: json.RawMessage(`{"seconds":3600}`)})
				if err != nil {
					errs <- err
					return
				}
				ids[i] = res.Task.ID
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return ids
}

// seed writes n open records onto the given server tasks, round robin,
// straight into the store: launching thousands of real calls would cost
// the test its time budget, and a record is a record to the reconcile.
func seed(t *testing.T, e *Engine, real []string, n int) {
	t.Helper()
	tasks := make([]*model.Task, len(real))
	for i, id := range real {
		res, err := e.tracker.Poll(ctxT(t), id) // the record as the server has it now
		if err != nil || res.Err != nil {
			t.Fatal(err, res.Err)
		}
		tasks[i] = res.Task
	}
	createAll(t, e, n, func(i int) (*model.Task, error) {
		like := tasks[i%len(tasks)]
		rec := model.NewIntent(like.Server, like.Tool, like.Arguments, "", time.Now())
		_, err := rec.Apply(model.Snapshot{
			TaskID: like.TaskID, Status: like.Status, StatusMessage: like.StatusMessage,
			CreatedAt: like.ServerCreatedAt, TTLMs: like.TTLMs, PollIntervalMs: like.PollIntervalMs,
		}, time.Now())
		return rec, err
	})
}

// createAll writes the n records newRec makes straight into the store,
// 32 at a time.
func createAll(t *testing.T, e *Engine, n int, newRec func(i int) (*model.Task, error)) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	const workers = 32
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				rec, err := newRec(i)
				if err == nil {
					err = e.store.Create(rec)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// A short command sends nothing but its own requests: no reconcile, no
// polls, however many tasks are open.
func TestShortCommandSendsOnlyItsOwnRequests(t *testing.T) {
	srv := startDemo(t, demo.Options{PollInterval: 10 * time.Millisecond})
	dir := t.TempDir()
	e := open(t, dir, srv, Options{})
	launch(t, e, 5)
	e.Close()

	e = open(t, dir, srv, Options{})
	ctx := ctxT(t)
	list, err := e.List(ctx, deck.Filter{})
	if err != nil || len(list) != 5 {
		t.Fatalf("List = %d entries, %v; want 5", len(list), err)
	}
	if _, err := e.Get(ctx, list[0].Task.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Call(ctx, deck.CallRequest{Server: demoRef, Tool: "echo", Args: json.RawMessage(`{"text":"hi"}`)}); err != nil {
		t.Fatal(err)
	}
	// The loop never started, so nothing can be polled; Close waits for
	// whatever the engine had in flight, so the count after it is final.
	if e.running() != nil {
		t.Fatal("a short command started the engine's poll loop")
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if n := gets(srv); n != 0 {
		t.Fatalf("%d tasks/get from a short command, want none", n)
	}
}

// The start-up reconcile of 2,000 open tasks on one server: one tasks/get
// each (the server's pollIntervalMs outlasts the test), bounded, with
// progress published at most ten times a second and a last report.
func TestReconcileTwoThousand(t *testing.T) {
	if testing.Short() {
		t.Skip("2,000 tasks")
	}
	n := 2000
	if raceEnabled {
		n = 500 // the detector slows go-sdk and Badger several times over
	}
	// Speed 1000: the sleeps report no progress while the test runs, so
	// the reconcile's polls change nothing (the writes of tasks that moved
	// are the store's cost, measured in BENCHMARKS).
	srv := startDemo(t, demo.Options{PollInterval: time.Hour, TTL: time.Hour, Speed: 1000, NoPush: true}) // polls only: a push would stand in for some
	dir := t.TempDir()
	e := open(t, dir, srv, Options{})
	const real = 40
	seed(t, e, launch(t, e, real), n-real)
	e.Close()
	seeded := gets(srv)

	e = open(t, dir, srv, Options{})
	start := time.Now()
	f, err := e.Watch(ctxT(t), 0)
	if err != nil {
		t.Fatal(err)
	}
	var progress []deck.Reconcile
	ev := next(t, f, 15*time.Second, "reconcile over", func(ev deck.Event) bool {
		if ev.Kind == deck.EventReconcile {
			progress = append(progress, *ev.Reconcile)
		}
		return ev.Kind == deck.EventReconcile && ev.Reconcile.Over
	})
	took := time.Since(start)
	t.Logf("reconciled %d open tasks in %v with %d progress events", n, took, len(progress))
	rep := *ev.Reconcile
	if rep.Total != n || rep.Done != n || rep.Reattached != n {
		t.Fatalf("report %+v, want %d re-attached", rep, n)
	}
	if limit := waitfor.Scale(3 * time.Second); took > limit && !raceEnabled { // the target is for the real build
		t.Errorf("reconcile took %v, want within %v", took, limit)
	}
	if len(progress) < 2 {
		t.Errorf("%d progress events, want progress before the end", len(progress))
	}
	if most := int(took/reconcileEvery) + 2; len(progress) > most {
		t.Errorf("%d progress events in %v, want at most %d (ten a second)", len(progress), took, most)
	}
	if got := gets(srv) - seeded; got != n {
		t.Fatalf("%d tasks/get, want exactly one per open task (%d)", got, n)
	}
	list, err := e.List(ctxT(t), deck.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, en := range list {
		if en.Poll.LastPolled.IsZero() {
			t.Fatalf("task %s was not polled", en.Task.ID)
		}
	}
}

func TestPollNowPollsWithin200ms(t *testing.T) {
	srv := startDemo(t, demo.Options{PollInterval: time.Hour})
	e := open(t, t.TempDir(), srv, Options{})
	ids := launch(t, e, 2)
	ctx := ctxT(t)
	f, err := e.Watch(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	next(t, f, 5*time.Second, "reconcile over", func(ev deck.Event) bool { return ev.Kind == deck.EventReconcile && ev.Reconcile.Over })
	before := gets(srv)
	start := time.Now()
	if err := e.PollNow(ctx, ids[:1]); err != nil {
		t.Fatal(err)
	}
	ev := next(t, f, time.Second, "poll event", about(ids[0], deck.EventPoll))
	if took := time.Since(start); took > waitfor.Scale(200*time.Millisecond) {
		t.Errorf("PollNow polled after %v, want within 200 ms (scaled)", took)
	}
	if ev.Entries[0].Poll.LastPolled.Before(start) {
		t.Errorf("poll state %+v is from before PollNow", ev.Entries[0].Poll)
	}
	if got := gets(srv) - before; got != 1 {
		t.Errorf("%d tasks/get after PollNow of one task, want 1", got)
	}
}

// A server whose polls hang must not hold back another server's polls:
// the loop wakes for what it can take, not for a full server's backlog.
func TestStalledServerDoesNotHoldOthersBack(t *testing.T) {
	slow := startDemo(t, demo.Options{PollInterval: time.Hour})
	fast := startDemo(t, demo.Options{PollInterval: 10 * time.Millisecond})
	cfg, err := mcpconfig.ParseConfig("test.json", fmt.Appendf(nil, `{"mcpServers":{"demo":{"url":%q},"slow":{"url":%q}}}`, fast.URL, slow.URL))
	if err != nil {
		t.Fatal(err)
	}
	e := open(t, t.TempDir(), fast, Options{Config: cfg, PerServer: 1})
	ctx := ctxT(t)
	for range 2 { // one poll in flight, one waiting for its slot
		if _, err := e.Call(ctx, deck.CallRequest{Server: model.ServerRef{Name: "slow"}, Tool: "sleep", Args: json.RawMessage(`{"seconds":3600}`)}); err != nil {
			t.Fatal(err)
		}
	}
	held := slow.Hold("tasks/get")
	defer held.Release()
	ids := launch(t, e, 1)
	f, err := e.Watch(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		next(t, f, 2*time.Second, "a poll of the fast server's task", about(ids[0], deck.EventPoll))
	}
}

// A task called while the loop runs joins the schedule, is polled to its
// end, and then leaves it: no poll after the end.
func TestCalledTaskIsPolledToItsEndThenLeft(t *testing.T) {
	srv := startDemo(t, demo.Options{PollInterval: 10 * time.Millisecond, Speed: 0.05})
	e := open(t, t.TempDir(), srv, Options{})
	ctx := ctxT(t)
	f, err := e.Watch(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	next(t, f, 5*time.Second, "reconcile over", func(ev deck.Event) bool { return ev.Kind == deck.EventReconcile && ev.Reconcile.Over })
	res, err := e.Call(ctx, deck.CallRequest{Server: demoRef, Tool: "sleep", Args: json.RawMessage(`{"seconds":4}`)}) // 200 ms at this speed
	if err != nil {
		t.Fatal(err)
	}
	next(t, f, 5*time.Second, "the task completed", func(ev deck.Event) bool {
		return about(res.Task.ID, deck.EventChange)(ev) && ev.Entries[0].Task.Status == model.StatusCompleted
	})
	// Left: the schedule no longer holds it, so no poll of it can follow.
	l := e.running()
	waitFor(t, time.Second, "the ended task to leave the schedule", func() bool {
		held := make(chan bool, 1)
		l.send(func() { _, _, ok := l.sched.Due(res.Task.ID); held <- ok })
		return !<-held
	})
}
