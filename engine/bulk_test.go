package engine

import (
	"slices"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/internal/waitfor"
	"github.com/taskdeck/taskdeck/model"
)

// CancelMany sends one tasks/cancel per task, at most bulkPerServer at
// once however many are asked, says per id what went wrong, and every
// task it cancelled reaches cancelled on its record without a poll per
// cancel made at once.
func TestCancelManyBoundsTheServerAndEndsEachTask(t *testing.T) {
	srv := startDemo(t, demo.Options{PollInterval: time.Hour})
	e := open(t, t.TempDir(), srv, Options{})
	ctx := ctxT(t)
	if _, err := e.Watch(ctx, 0); err != nil { // the loop runs, as under the dashboard
		t.Fatal(err)
	}
	ids := launch(t, e, 3*bulkPerServer)
	flight := srv.CountInFlight("tasks/cancel", 20*time.Millisecond)
	asked := slices.Insert(slices.Clone(ids), 3, "no-such-task")

	errs := e.CancelMany(ctx, asked)
	if len(errs) != len(asked) {
		t.Fatalf("%d outcomes for %d ids", len(errs), len(asked))
	}
	for i, err := range errs {
		switch {
		case i == 3:
			kindIs(t, err, deck.KindNotFound)
		case err != nil:
			t.Fatalf("cancel of %s: %v", asked[i], err)
		}
	}
	if got := len(srv.Requests("tasks/cancel")); got != len(ids) {
		t.Fatalf("the server got %d tasks/cancel, want %d", got, len(ids))
	}
	if m := flight.Max(); m > bulkPerServer || m < 2 {
		t.Fatalf("%d tasks/cancel in flight at most, want 2 to %d", m, bulkPerServer)
	}
	waitfor.Within(t, 10*time.Second, "every task cancelled on its record", func() bool {
		for _, id := range ids {
			if en, err := e.Get(ctx, id); err != nil || en.Task.Status != model.StatusCancelled {
				return false
			}
		}
		return true
	})
}

// Without the loop (no Watch, no PollNow) nothing would poll a task, so
// CancelMany polls each at once, as Cancel does.
func TestCancelManyWithoutTheLoopPollsAtOnce(t *testing.T) {
	srv := startDemo(t, demo.Options{PollInterval: time.Hour})
	e := open(t, t.TempDir(), srv, Options{})
	ctx := ctxT(t)
	ids := launch(t, e, 3)
	for i, err := range e.CancelMany(ctx, ids) {
		if err != nil {
			t.Fatalf("cancel of %s: %v", ids[i], err)
		}
	}
	for _, id := range ids {
		en, err := e.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if en.Task.Status != model.StatusCancelled || !en.Task.CancelRequested {
			t.Fatalf("task %s is %s (cancel requested: %v) once CancelMany returned, want cancelled", id, en.Task.Status, en.Task.CancelRequested)
		}
	}
}
