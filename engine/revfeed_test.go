package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/model"
)

func echo(t *testing.T, e *Engine, text string) *model.Task {
	t.Helper()
	res, err := e.Call(ctxT(t), deck.CallRequest{Server: demoRef, Tool: "echo", Args: json.RawMessage(fmt.Sprintf(`{"text":%q}`, text))})
	if err != nil {
		t.Fatal(err)
	}
	return res.Task
}

// The feed starts with every record as of a revision, then every change
// as committed, each at its revision, with its poll state.
func TestFeedSnapshotThenLive(t *testing.T) {
	srv := startDemo(t, demo.Options{PollInterval: time.Hour})
	e := open(t, t.TempDir(), srv, Options{})
	old := echo(t, e, "before")
	f, err := e.Watch(ctxT(t), 0)
	if err != nil {
		t.Fatal(err)
	}
	snap := next(t, f, time.Second, "the snapshot", func(ev deck.Event) bool { return ev.Kind == deck.EventSnapshot })
	if len(snap.Entries) != 1 || snap.Entries[0].Task.ID != old.ID || snap.Rev != e.store.Revision() {
		t.Fatalf("snapshot %+v at %d, want the one record at the store's revision %d", snap.Entries, snap.Rev, e.store.Revision())
	}
	id := launch(t, e, 1)[0]
	ev := next(t, f, time.Second, "the call's handle", func(ev deck.Event) bool {
		return ev.Kind == deck.EventChange && about(id)(ev) && ev.Entries[0].Task.TaskID != ""
	})
	if ev.Rev <= snap.Rev || ev.Entries[0].Task.Revision != ev.Rev {
		t.Fatalf("change at %d (record revision %d), want after the snapshot's %d", ev.Rev, ev.Entries[0].Task.Revision, snap.Rev)
	}
	if err := e.Forget(ctxT(t), old.ID); err != nil {
		t.Fatal(err)
	}
	gone := next(t, f, time.Second, "the deletion", func(ev deck.Event) bool { return ev.Kind == deck.EventChange && len(ev.Deleted) > 0 })
	if gone.Deleted[0] != old.ID || gone.Rev <= ev.Rev {
		t.Fatalf("deletion %+v at %d", gone.Deleted, gone.Rev)
	}
}

// The first event that carries a call's handle comes once the handle is
// on disk: the record read back then has it.
func TestCallHandleIsCommittedBeforeTheFeedHearsOfIt(t *testing.T) {
	srv := startDemo(t, demo.Options{PollInterval: time.Hour})
	e := open(t, t.TempDir(), srv, Options{})
	ctx := ctxT(t)
	f, err := e.Watch(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	var res deck.CallResult
	done := make(chan error, 1)
	go func() {
		var err error
		res, err = e.Call(ctx, deck.CallRequest{Server: demoRef, Tool: "sleep", Args: json.RawMessage(`{"seconds":60}`)})
		done <- err
	}()
	ev := next(t, f, 2*time.Second, "the handle", func(ev deck.Event) bool {
		return ev.Kind == deck.EventChange && len(ev.Entries) == 1 && ev.Entries[0].Task.TaskID != ""
	})
	stored, err := e.store.Get(ev.Entries[0].Task.ID)
	if err != nil || stored.TaskID != ev.Entries[0].Task.TaskID {
		t.Fatalf("stored %+v, %v when the feed told of the handle", stored, err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if res.Task.ID != stored.ID {
		t.Fatalf("Call returned %s, the feed told of %s", res.Task.ID, stored.ID)
	}
}

// A watcher that comes back with its last revision gets what it missed,
// in revision order, each record once, then caughtUp, then live changes;
// also while commits go on during its replay.
func TestFeedResumesFromARevisionMissingNothing(t *testing.T) {
	srv := startDemo(t, demo.Options{PollInterval: time.Hour})
	e := open(t, t.TempDir(), srv, Options{})
	ctx := ctxT(t)
	first := echo(t, e, "first")
	from := e.store.Revision()

	var wg sync.WaitGroup
	var mu sync.Mutex
	var made []string
	stop := make(chan struct{})
	wg.Go(func() { // commits all through the replay
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			res, err := e.Call(context.Background(), deck.CallRequest{Server: demoRef, Tool: "echo", Args: json.RawMessage(fmt.Sprintf(`{"text":"n%d"}`, i))})
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			made = append(made, res.Task.ID)
			mu.Unlock()
		}
	})
	waitFor(t, 5*time.Second, "calls under way", func() bool { mu.Lock(); defer mu.Unlock(); return len(made) >= 5 })
	if err := e.Forget(ctx, first.ID); err != nil {
		t.Fatal(err)
	}
	f, err := e.Watch(ctx, from)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "more calls", func() bool { mu.Lock(); defer mu.Unlock(); return len(made) >= 20 })
	close(stop)
	wg.Wait()
	last := e.store.Revision()

	seen := map[string]model.Status{}
	var deleted []string
	prev, caughtUp := from, false
	for prev < last {
		ev := next(t, f, 5*time.Second, fmt.Sprintf("revision %d", last), func(deck.Event) bool { return true })
		switch ev.Kind {
		case deck.EventCaughtUp:
			caughtUp = true
			continue
		case deck.EventChange:
		default:
			continue
		}
		if ev.Rev <= prev {
			t.Fatalf("change at %d after %d: out of order or twice", ev.Rev, prev)
		}
		prev = ev.Rev
		deleted = append(deleted, ev.Deleted...)
		for _, en := range ev.Entries {
			seen[en.Task.ID] = en.Task.Status
		}
	}
	if !caughtUp {
		t.Error("no caughtUp event")
	}
	if !slices.Contains(deleted, first.ID) {
		t.Errorf("the deletion of %s was missed", first.ID)
	}
	for _, id := range made {
		if seen[id] != model.StatusCompleted {
			t.Errorf("record %s seen as %q, want its last change (completed)", id, seen[id])
		}
	}
}

// Watches that start while commits pour in: each sees every revision at
// most once, in order (a commit between the feed's subscription and its
// read is in both, and must come once).
func TestFeedStartedDuringCommitsHasNoDuplicates(t *testing.T) {
	srv := startDemo(t, demo.Options{})
	e := open(t, t.TempDir(), srv, Options{})
	ctx := ctxT(t)
	from := echo(t, e, "first").Revision
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				rec := model.NewIntent(demoRef, "echo", json.RawMessage(`{}`), "", time.Now())
				if err := e.store.Create(rec); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	defer func() { close(stop); wg.Wait() }()
	for i := range 20 {
		wctx, cancel := context.WithCancel(ctx)
		start := from
		if i%2 == 1 {
			start = 0 // a snapshot, then live
		}
		f, err := e.Watch(wctx, start)
		if err != nil {
			t.Fatal(err)
		}
		var prev uint64
		for n := 0; n < 30; n++ {
			ev := next(t, f, 5*time.Second, "an event", func(deck.Event) bool { return true })
			if ev.Kind == deck.EventSnapshot {
				prev = ev.Rev
				continue
			}
			if ev.Kind != deck.EventChange {
				continue
			}
			if ev.Rev <= prev && prev != 0 {
				t.Fatalf("watch %d: change at %d after %d", i, ev.Rev, prev)
			}
			prev = ev.Rev
		}
		cancel()
	}
}
