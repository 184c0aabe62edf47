package decktest_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/deck/decktest"
	"github.com/taskdeck/taskdeck/internal/waitfor"
	"github.com/taskdeck/taskdeck/model"
)

func task(tool string, st model.Status) *model.Task {
	t := model.NewIntent(model.ServerRef{Name: "demo"}, tool, nil, "", time.Now())
	t.Status = st
	return t
}

// next reads one event, or fails once the test's deadline nears.
func next(t *testing.T, f deck.Feed) deck.Event {
	t.Helper()
	ctx := t.Context()
	if dl, ok := t.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, dl.Add(-time.Second))
		defer cancel()
	}
	select {
	case ev, ok := <-f.Events():
		if !ok {
			t.Fatalf("the feed ended: %v", f.Err())
		}
		return ev
	case <-ctx.Done():
		t.Fatal("no event before the test's deadline")
	}
	return deck.Event{}
}

// A feed starts with a snapshot, then each change; watched again from a
// revision it replays what came after and says it caught up; a cut ends
// it with the cause.
func TestFeedSnapshotChangesResumeAndCut(t *testing.T) {
	d := decktest.New(nil)
	a := task("a", model.StatusWorking)
	d.Put(a)
	f, err := d.WatchWindow(t.Context(), 0, deck.Window{Finished: 10})
	if err != nil {
		t.Fatal(err)
	}
	if ev := next(t, f); ev.Kind != deck.EventSnapshot || len(ev.Entries) != 1 || ev.Counts[model.StatusWorking] != 1 {
		t.Fatalf("first event %+v, want a snapshot of the one record with its count", ev)
	}
	done := a.Clone()
	done.Status = model.StatusCompleted
	rev := d.Put(done)
	if ev := next(t, f); ev.Kind != deck.EventChange || ev.Rev != rev || ev.Prev != model.StatusWorking || ev.Entries[0].Task.Status != model.StatusCompleted {
		t.Fatalf("change %+v, want a's completion at rev %d after working", ev, rev)
	}
	cause := &deck.Error{Kind: deck.KindOwnerGone, Message: "gone"}
	d.Cut(cause)
	for range f.Events() {
	}
	if !errors.Is(f.Err(), cause) {
		t.Fatalf("the cut feed ended with %v, want the cause", f.Err())
	}

	b := task("b", model.StatusWorking)
	d.Put(b)
	g, err := d.WatchWindow(t.Context(), rev, deck.Window{Finished: 10})
	if err != nil {
		t.Fatal(err)
	}
	if ev := next(t, g); ev.Kind != deck.EventChange || ev.Entries[0].Task.ID != b.ID {
		t.Fatalf("the resume brought %+v first, want b's change", ev)
	}
	if ev := next(t, g); ev.Kind != deck.EventCaughtUp || ev.Counts[model.StatusCompleted] != 1 || ev.Counts[model.StatusWorking] != 1 {
		t.Fatalf("then %+v, want caughtUp with the counts", ev)
	}
	if w := d.Watches(); !slices.Equal(w, []uint64{0, rev}) {
		t.Fatalf("watched from %v", w)
	}
}

// Calls go as scripted; a tool not in the server's list is a usage error;
// actions on a refused record fail and change nothing.
func TestScriptedCallsAndRefusals(t *testing.T) {
	d := decktest.New(nil)
	d.SetTools(deck.ToolList{Server: "demo", Tools: []deck.Tool{{Name: "approve"}, {Name: "sleep"}}})
	d.Script("approve", decktest.Outcome{Input: map[string]model.InputRequest{"ok": {Method: "elicitation/create"}}})
	ctx := t.Context()
	if _, err := d.Call(ctx, deck.CallRequest{Server: model.ServerRef{Name: "demo"}, Tool: "nope"}); deck.KindOf(err) != deck.KindUsage {
		t.Fatalf("unknown tool: %v", err)
	}
	res, err := d.Call(ctx, deck.CallRequest{Server: model.ServerRef{Name: "demo"}, Tool: "approve"})
	if err != nil || !res.NeedsInput {
		t.Fatalf("approve: %+v, %v; want NeedsInput", res, err)
	}
	res, err = d.Continue(ctx, res.Task.ID, map[string]json.RawMessage{"ok": json.RawMessage(`true`)})
	if err != nil || res.NeedsInput || res.Task.Status != model.StatusWorking {
		t.Fatalf("answered: %+v, %v; want a working task", res, err)
	}
	sleep, err := d.Call(ctx, deck.CallRequest{Server: model.ServerRef{Name: "demo"}, Tool: "sleep"})
	if err != nil {
		t.Fatal(err)
	}
	refusal := errors.New("refused by the test")
	d.Refuse(sleep.Task.ID, refusal)
	errs := d.CancelMany(ctx, []string{res.Task.ID, sleep.Task.ID})
	if errs[0] != nil || !errors.Is(errs[1], refusal) {
		t.Fatalf("CancelMany: %v", errs)
	}
	if e, _ := d.Get(ctx, sleep.Task.ID); e.Task.Status != model.StatusWorking {
		t.Fatalf("the refused task is %s", e.Task.Status)
	}
	if n := len(d.Calls()); n != 3 {
		t.Fatalf("%d calls noted, want 3", n)
	}
}

// A held watch is counted at once and returns only once released, with
// the changes made meanwhile; one whose context ends first returns its
// error.
func TestHoldHoldsWatches(t *testing.T) {
	d := decktest.New(nil)
	release := d.Hold()
	done := make(chan deck.Feed, 1)
	go func() {
		f, err := d.Watch(t.Context(), 0)
		if err != nil {
			t.Error(err)
		}
		done <- f
	}()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := d.Watch(ctx, 0); err == nil {
		t.Fatal("a held watch whose context ended returned no error")
	}
	waitfor.Within(t, 10*time.Second, "the held watch counted", func() bool { return len(d.Watches()) == 2 })
	a := task("sleep", model.StatusWorking)
	d.Put(a)
	select {
	case <-done:
		t.Fatal("a held watch returned before its release")
	default:
	}
	release()
	release() // a second release is no error
	f := <-done
	if ev := next(t, f); ev.Kind != deck.EventSnapshot || len(ev.Entries) != 1 || ev.Entries[0].Task.ID != a.ID {
		t.Fatalf("the released watch's first event: %+v, want a snapshot of the record put while it was held", ev)
	}
}
