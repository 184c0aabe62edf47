package engine

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/internal/hostile"
	"github.com/taskdeck/taskdeck/internal/waitfor"
	"github.com/taskdeck/taskdeck/mcpclient/wire"
	"github.com/taskdeck/taskdeck/model"
)

// seedHolds writes an open record for each of the demo's hold tasks
// straight into the store, as a handle would have left it: 2,000 real
// calls would cost the test its time budget, and a record is a record to
// the engine that starts on it.
func seedHolds(t *testing.T, e *Engine, taskIDs []string) {
	t.Helper()
	hour := time.Hour.Milliseconds()
	createAll(t, e, len(taskIDs), func(i int) (*model.Task, error) {
		rec := model.NewIntent(demoRef, demo.HoldTool, json.RawMessage(`{"steps":1}`), "", time.Now())
		_, err := rec.Apply(model.Snapshot{TaskID: taskIDs[i], Status: model.StatusWorking,
			CreatedAt: time.Now(), TTLMs: &hour, PollIntervalMs: &hour}, time.Now())
		return rec, err
	})
}

// pushedCount is how many open records a stream up pushes now.
func pushedCount(t *testing.T, e *Engine) int {
	t.Helper()
	list, err := e.List(ctxT(t), deck.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, en := range list {
		if en.Poll.Pushed && !en.Task.Status.Terminal() {
			n++
		}
	}
	return n
}

// listenIDs is how many task ids each listen the server received asked for.
func listenIDs(t *testing.T, srv *hostile.Server) []int {
	t.Helper()
	var out []int
	for _, r := range srv.Requests(wire.MethodListen) {
		var req struct {
			Params wire.ListenParams `json:"params"`
		}
		if err := json.Unmarshal(r.Body, &req); err != nil {
			t.Fatal(err)
		}
		out = append(out, len(req.Params.Notifications.TaskIDs))
	}
	return out
}

// Issue 20, item 13: 2,000 open tasks on one server are all pushed, on
// streams of at most pushIDsPerStream ids, the server's push state is
// up, and their ends come by push: no task is polled once they are. On
// e529745 one stream asked for all 2,000, the demo dropped it at once,
// and the engine asked again for the same 2,000 for as long as it ran
// ("down, re-subscribing"), polling them all.
func TestPushTwoThousandTasksOnOneServer(t *testing.T) {
	srv := startDemo(t, demo.Options{Hold: true, PollInterval: time.Hour, TTL: time.Hour})
	const n = 2000
	taskIDs, err := srv.Demo.OpenHolds(n, 1)
	if err != nil {
		t.Fatal(err)
	}
	e := open(t, t.TempDir(), srv, Options{PushSafety: time.Hour})
	seedHolds(t, e, taskIDs)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	f, err := e.Watch(ctx, 0) // the engine starts on 2,000 open records
	if err != nil {
		t.Fatal(err)
	}
	next(t, f, 2*time.Minute, "the start-up reconcile over", func(ev deck.Event) bool {
		return ev.Kind == deck.EventReconcile && ev.Reconcile.Over
	})
	if !waitfor.Until(2*time.Minute, 100*time.Millisecond, func() bool { return pushedCount(t, e) == n }) {
		s, _ := e.Servers(ctxT(t))
		t.Fatalf("%d of %d tasks pushed; servers %+v", pushedCount(t, e), n, s)
	}
	if s, err := e.Servers(ctxT(t)); err != nil || s[0].Push != deck.PushUp {
		t.Fatalf("servers %+v (%v), want push up", s, err)
	}
	gets0 := gets(srv)
	for _, id := range taskIDs {
		waitFor(t, 10*time.Second, "the hold task ready to step", func() bool { return srv.Demo.Step(id) == nil })
	}
	waitfor.Within(t, 2*time.Minute, "every task completed", func() bool { return completed(t, e) == n })
	// Only a poll in flight as the reconcile ended (at most PerServer) may
	// come after: every end was pushed.
	if polled := gets(srv) - gets0; polled > mcpclientPerServer(e) {
		t.Errorf("%d tasks/get while the %d ends were pushed, want at most %d", polled, n, mcpclientPerServer(e))
	}
	if s, err := e.Servers(ctxT(t)); err != nil || s[0].Push == deck.PushDown {
		t.Errorf("servers %+v (%v): push went down", s, err)
	}
	for _, k := range listenIDs(t, srv) {
		if k > pushIDsPerStream {
			t.Fatalf("a listen asked for %d ids, want at most %d", k, pushIDsPerStream)
		}
	}
	t.Logf("%d tasks pushed to their ends over %d listens", n, listens(srv))
}

func mcpclientPerServer(e *Engine) int { return e.opts.PerServer }

// Issue 20, item 13: a server that refuses every listen (503, as a busy
// one does) is asked again with backoff, the policy's default doubling to
// its cap and jittered to no less than half, never at once; its tasks end
// by polling meanwhile, and it shows as down.
func TestPushRefusedListenBackedOff(t *testing.T) {
	srv := startDemo(t, demo.Options{Hold: true, PollInterval: 10 * time.Millisecond, TTL: time.Hour})
	c := onChanges(srv)
	srv.On(wire.MethodListen, hostile.HTTPStatus(503))
	e := open(t, t.TempDir(), srv, Options{}) // fastPolicy: 20 ms doubling to 200 ms
	start := time.Now()
	f, err := e.Watch(ctxT(t), 0)
	if err != nil {
		t.Fatal(err)
	}
	hold(t, e, 1) // never stepped: the engine goes on asking
	recs := []*model.Task{hold(t, e, 2), hold(t, e, 2), hold(t, e, 2)}
	for _, msg := range []string{"step 1 of 2", ""} {
		for _, rec := range recs {
			step(t, srv, c, rec.TaskID)
			committed(t, f, rec.ID, msg, 5*time.Second)
		}
	}
	waitFor(t, 5*time.Second, "a few refusals", func() bool { return listens(srv) >= 6 })
	l, window := listens(srv), time.Since(start)
	// Waits of at least 10, 20, 40, 80, then 100 ms: after the first
	// listen, at most 4 more and then one per 100 ms of the window.
	most := 1 + 4 + int(window/(fastPolicy.Cap/2))
	t.Logf("%d listens in %v (bound %d)", l, window, most)
	if l > most {
		t.Fatalf("%d listens in %v to a server that refuses them, want at most %d", l, window, most)
	}
	if s, err := e.Servers(ctxT(t)); err != nil || s[0].Push == deck.PushUp {
		t.Fatalf("servers %+v (%v), want push down", s, err)
	}
}

// Issue 20, item 11: a stream that acknowledges and then carries nothing,
// no event and no keep-alive, is taken as dropped after PushSilence: its
// task is polled at once and the server asked again. A task that ended
// on the silent stream is seen ended within PushSilence and a poll, not
// at its safety poll an hour later (10 minutes by default on e529745).
func TestPushSilentStreamDropped(t *testing.T) {
	srv := startDemo(t, demo.Options{Hold: true, PollInterval: time.Hour, TTL: time.Hour})
	c := onChanges(srv)
	srv.SilentPush()
	const silence = time.Second
	e := open(t, t.TempDir(), srv, Options{PushSafety: time.Hour, PushSilence: silence})
	f, err := e.Watch(ctxT(t), 0)
	if err != nil {
		t.Fatal(err)
	}
	rec, other := hold(t, e, 1), hold(t, e, 1) // other stays open: the engine goes on asking
	waitFor(t, 5*time.Second, "the tasks pushed", func() bool { return pushedOf(t, e, rec.ID) && pushedOf(t, e, other.ID) })
	first := listens(srv)
	changed := step(t, srv, c, rec.TaskID) // its end goes out on a stream that passes nothing
	en, seen := committed(t, f, rec.ID, "", 10*time.Second)
	late := seen.Sub(changed)
	t.Logf("the end seen %v after the server's, over a stream silent since its acknowledgement (silence bound %v)", late, silence)
	if en.Task.Status != model.StatusCompleted {
		t.Fatalf("ended %s, want completed", en.Task.Status)
	}
	// The bound, and a poll that a loaded machine may make slow.
	if most := silence + waitfor.Scale(5*time.Second); late > most {
		t.Fatalf("the end seen %v after the server's, want within %v", late, most)
	}
	waitFor(t, 5*time.Second, "a re-subscribe", func() bool { return listens(srv) > first })
}

// Issue 20, item 12: a pushed state read before a poll's newer answer but
// applied after it (a stream's opening state, applied once the stream is
// taken up) leaves the record as the poll left it. On e529745 progress
// went back (33 times after a takeover on a fleet).
func TestPushStaleStateAfterNewerPoll(t *testing.T) {
	srv := startDemo(t, demo.Options{Hold: true, NoPush: true, PollInterval: time.Hour, TTL: time.Hour})
	c := onChanges(srv)
	e := open(t, t.TempDir(), srv, Options{}) // no loop: this test alone polls and pushes
	rec := hold(t, e, 3)
	sess, err := e.pool.Session(ctxT(t), demoRef)
	if err != nil {
		t.Fatal(err)
	}
	var old *model.Snapshot // the state a stream opening now would push
	waitFor(t, 5*time.Second, "the hold task to wait", func() bool {
		old, err = sess.GetTask(ctxT(t), rec.TaskID)
		return err == nil && old.StatusMessage == "step 0 of 3"
	})
	step(t, srv, c, rec.TaskID)
	if res, err := e.tracker.Poll(ctxT(t), rec.ID); err != nil || res.Task.StatusMessage != "step 1 of 3" {
		t.Fatalf("poll: %v, want step 1 of 3", err)
	}
	res, err := e.tracker.Pushed(rec.ID, *old)
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.store.Get(rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	if res.Changed || got.StatusMessage != "step 1 of 3" {
		t.Fatalf("after the older pushed state: changed %v, %q; want the poll's %q", res.Changed, got.StatusMessage, "step 1 of 3")
	}
}

// Past its streams' room (here 2 streams of 2 ids) a server's open tasks
// are polled, and one takes the place a pushed task leaves when it ends;
// no listen asks for more than a stream's ids.
func TestPushBeyondTheStreamsPolled(t *testing.T) {
	srv := startDemo(t, demo.Options{Hold: true, PollInterval: 10 * time.Millisecond, TTL: time.Hour})
	c := onChanges(srv)
	e := open(t, t.TempDir(), srv, Options{PushSafety: time.Hour, pushLimits: pushLimits{ids: 2, streams: 2}})
	f, err := e.Watch(ctxT(t), 0)
	if err != nil {
		t.Fatal(err)
	}
	var recs []*model.Task
	for range 6 {
		recs = append(recs, hold(t, e, 1))
	}
	waitFor(t, 10*time.Second, "four tasks pushed", func() bool { return pushedCount(t, e) == 4 })
	if s, err := e.Servers(ctxT(t)); err != nil || s[0].Push != deck.PushUp {
		t.Fatalf("servers %+v (%v), want push up", s, err)
	}
	var ended *model.Task
	for _, rec := range recs {
		if pushedOf(t, e, rec.ID) {
			ended = rec
			break
		}
	}
	step(t, srv, c, ended.TaskID)
	committed(t, f, ended.ID, "", 5*time.Second)
	// Five open, four places: a polled task takes the place.
	waitFor(t, 10*time.Second, "a polled task pushed in its place", func() bool { return pushedCount(t, e) == 4 })
	for _, rec := range recs {
		if rec != ended {
			step(t, srv, c, rec.TaskID)
			committed(t, f, rec.ID, "", 5*time.Second)
		}
	}
	for _, k := range listenIDs(t, srv) {
		if k > 2 {
			t.Fatalf("a listen asked for %d ids, want at most 2", k)
		}
	}
}
