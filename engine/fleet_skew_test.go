package engine

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/internal/pgtest"
	"github.com/taskdeck/taskdeck/internal/waitfor"
	"github.com/taskdeck/taskdeck/model"
)

// callingIntent is the one intent calling in e's store, once there is
// one (nil: none came). It runs in a server's handler: it cannot stop the
// test.
func callingIntent(e *Engine) *model.Task {
	var rec *model.Task
	waitfor.Until(30*time.Second, 5*time.Millisecond, func() bool {
		recs, err := e.store.ByStatus(model.StatusCalling)
		if err != nil || len(recs) == 0 {
			return false
		}
		rec = recs[0]
		return true
	})
	return rec
}

// wasOrphaned tells whether rec ever went orphaned.
func wasOrphaned(rec *model.Task) bool {
	return slices.ContainsFunc(rec.History, func(tr model.Transition) bool { return tr.To == model.StatusOrphaned })
}

// TestFleetSkewedClockCallNotOrphaned: an engine whose clock is 10
// minutes slow makes a call the server answers slowly; another engine
// claims its intent meanwhile and must leave it to finish (its age is the
// database's, not the maker's timestamps against its own clock). The
// handle is recorded and the intent never orphaned.
func TestFleetSkewedClockCallNotOrphaned(t *testing.T) {
	srv := startDemo(t, demo.Options{Speed: 1, PollInterval: 50 * time.Millisecond, NoPush: true})
	db := pgtest.DB(t)
	watcher := open(t, t.TempDir(), srv, Options{Store: db, Claim: true, ClaimLease: testLease, ClaimRenew: testRenew})
	if err := watcher.PollNow(ctxT(t), nil); err != nil {
		t.Fatal(err)
	}
	slow := open(t, t.TempDir(), srv, Options{Store: db, Claim: true, ClaimLease: testLease, ClaimRenew: testRenew,
		RequestTimeout: 20 * time.Second, Now: func() time.Time { return time.Now().Add(-10 * time.Minute) }})
	// The server has the task; its answer waits until the watcher has
	// claimed the intent and judged it (left it waiting, or orphaned it).
	var judged *model.Task
	gate := srv.HoldAnswer("tools/call")
	go func() {
		defer gate.Release()
		rec := callingIntent(slow)
		if rec == nil {
			return
		}
		waitfor.Until(30*time.Second, 5*time.Millisecond, func() bool {
			waiting := watcher.claims.View().Waiting[rec.ID]
			cur, err := slow.store.Get(rec.ID)
			if err == nil && (waiting || cur.Status == model.StatusOrphaned) {
				judged = cur
				return true
			}
			return false
		})
	}()
	res, err := slow.Call(ctxT(t), deck.CallRequest{Server: demoRef, Tool: "sleep", Args: json.RawMessage(`{"seconds":0.5}`)})
	switch {
	case judged == nil:
		t.Fatal("the watcher never claimed the intent during the call")
	case judged.Status == model.StatusOrphaned:
		t.Errorf("another engine orphaned the live call of an engine whose clock is 10 minutes slow: %s", judged.StatusMessage)
	}
	if err != nil {
		t.Fatalf("the call failed: %v", err)
	}
	if res.Task.TaskID == "" || wasOrphaned(res.Task) {
		t.Errorf("the call's record is %s with task id %q, history %+v; want its handle, never orphaned", res.Task.Status, res.Task.TaskID, res.Task.History)
	}
	waitFor(t, 30*time.Second, "the task to complete, watched by the fleet", func() bool {
		rec, err := watcher.store.Get(res.Task.ID)
		return err == nil && rec.Status == model.StatusCompleted
	})
}

// TestFleetOrphanedIntentTakesItsHandle: another engine orphans an intent
// while its call is in flight (as when its maker seemed gone); the handle
// that comes then is recorded, the orphan resolved by it with a reason,
// and the task is watched to its end.
func TestFleetOrphanedIntentTakesItsHandle(t *testing.T) {
	srv := startDemo(t, demo.Options{Speed: 1, PollInterval: 50 * time.Millisecond, NoPush: true})
	db := pgtest.DB(t)
	maker := open(t, t.TempDir(), srv, Options{Store: db, Claim: true, ClaimLease: testLease, ClaimRenew: testRenew, RequestTimeout: 20 * time.Second})
	other := open(t, t.TempDir(), srv, Options{Store: db, Claim: true, ClaimLease: testLease, ClaimRenew: testRenew})
	gate := srv.HoldAnswer("tools/call")
	go func() {
		defer gate.Release()
		rec := callingIntent(maker)
		if rec == nil {
			return
		}
		if got, err := other.tracker.Orphan(rec.ID); err != nil || got.Status != model.StatusOrphaned {
			t.Errorf("the other engine could not orphan the intent: %v", err)
		}
	}()
	res, err := maker.Call(ctxT(t), deck.CallRequest{Server: demoRef, Tool: "sleep", Args: json.RawMessage(`{"seconds":0.5}`)})
	if err != nil {
		t.Fatalf("the handle of an intent orphaned meanwhile was refused: %v", err)
	}
	rec := res.Task
	resolved := slices.ContainsFunc(rec.History, func(tr model.Transition) bool {
		return tr.From == model.StatusOrphaned && tr.Message == model.OrphanResolved
	})
	if rec.TaskID == "" || !resolved {
		t.Fatalf("the record is %s with task id %q, history %+v; want the handle, the orphan resolved by it", rec.Status, rec.TaskID, rec.History)
	}
	if err := other.PollNow(ctxT(t), nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the task to complete, watched by the fleet", func() bool {
		got, err := other.store.Get(rec.ID)
		return err == nil && got.Status == model.StatusCompleted
	})
}
