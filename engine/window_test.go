package engine

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/internal/waitfor"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store/badger"
	"github.com/taskdeck/taskdeck/store/storetest"
)

// A windowed watcher gets the open tasks, the newest finished ones and
// the whole store's counts, then each change with the status it had; a
// resume ends with the counts as of its end; List pages through the rest
// from a cursor.
func TestWatchWindowHoldsOpenTasksAPageAndTheCounts(t *testing.T) {
	dir := t.TempDir()
	st, err := badger.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	var done []string // newest first
	for i := range 30 {
		done = append([]string{storetest.Create(t, st, "", model.StatusCompleted, storetest.T0.Add(time.Duration(i)*time.Second)).ID}, done...)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	srv := startDemo(t, demo.Options{})
	e := open(t, dir, srv, Options{})
	open := launchAll(t, []*Engine{e}, 2, 60)
	ctx := ctxT(t)

	f, err := e.WatchWindow(ctx, 0, deck.Window{Finished: 5})
	if err != nil {
		t.Fatal(err)
	}
	snap := next(t, f, 5*time.Second, "the snapshot", func(ev deck.Event) bool { return ev.Kind == deck.EventSnapshot })
	var got []string
	for _, en := range snap.Entries {
		got = append(got, en.Task.ID)
	}
	want := append([]string{open[1].ID, open[0].ID}, done[:5]...)
	if !slices.Equal(got, want) {
		t.Fatalf("snapshot holds %v, want the open tasks newest first and the 5 newest finished %v", got, want)
	}
	if fmt.Sprint(snap.Counts) != fmt.Sprint(map[model.Status]int{model.StatusWorking: 2, model.StatusCompleted: 30}) {
		t.Fatalf("snapshot counts %v, want 2 working and 30 completed", snap.Counts)
	}

	oldest := done[len(done)-1]
	if err := e.Forget(ctx, oldest); err != nil {
		t.Fatal(err)
	}
	gone := next(t, f, 5*time.Second, "the deletion", func(ev deck.Event) bool { return slices.Contains(ev.Deleted, oldest) })
	if gone.Prev != model.StatusCompleted {
		t.Fatalf("the deletion of a record the window does not hold says it was %q, want completed", gone.Prev)
	}

	again, err := e.WatchWindow(ctx, snap.Rev, deck.Window{Finished: 5})
	if err != nil {
		t.Fatal(err)
	}
	caught := next(t, again, 5*time.Second, "caught up", func(ev deck.Event) bool { return ev.Kind == deck.EventCaughtUp })
	if caught.Rev < gone.Rev || caught.Counts[model.StatusCompleted] != 29 || caught.Counts[model.StatusWorking] != 2 {
		t.Fatalf("resume caught up at %d with %v, want at least rev %d, 29 completed, 2 working", caught.Rev, caught.Counts, gone.Rev)
	}

	// The pages after the window's last record reach every finished one.
	before, seen := done[4], done[:5]
	for {
		page, err := e.List(ctx, deck.Filter{Groups: []string{"finished"}, Before: before, Limit: 7})
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		for _, en := range page {
			seen = append(seen, en.Task.ID)
		}
		before = page[len(page)-1].Task.ID
	}
	if !slices.Equal(seen, done[:29]) {
		t.Fatalf("the window and its pages hold %v, want every finished record newest first %v", seen, done[:29])
	}
	if _, err := e.WatchWindow(ctx, 0, deck.Window{Finished: -1}); deck.KindOf(err) != deck.KindUsage {
		t.Fatalf("a window of -1 finished records: %v, want a usage error", err)
	}
}

// A windowed snapshot comes in parts, the first one small, and a resume
// from a part before the last reads the snapshot again.
func TestWatchWindowSnapshotComesInParts(t *testing.T) {
	dir := t.TempDir()
	st, err := badger.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	n := 2*snapshotPart + 10
	for i := range n {
		storetest.Create(t, st, "", model.StatusCompleted, storetest.T0.Add(time.Duration(i)*time.Second))
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	e := open(t, dir, startDemo(t, demo.Options{}), Options{})
	f, err := e.WatchWindow(ctxT(t), 0, deck.Window{Finished: n})
	if err != nil {
		t.Fatal(err)
	}
	var parts []int
	var last deck.Event
	for len(parts) == 0 || last.More {
		last = next(t, f, 5*time.Second, "a part", func(ev deck.Event) bool {
			return ev.Kind == deck.EventSnapshot || ev.Kind == deck.EventSnapshotMore
		})
		if (len(parts) == 0) != (last.Kind == deck.EventSnapshot) || (len(parts) == 0) != (last.Counts != nil) {
			t.Fatalf("part %d is a %s (counts %v): want the snapshot with the counts first, then its parts", len(parts), last.Kind, last.Counts)
		}
		parts = append(parts, len(last.Entries))
	}
	if want := []int{snapshotPart, snapshotPart, 10}; !slices.Equal(parts, want) {
		t.Fatalf("the snapshot came in parts of %v, want %v", parts, want)
	}
}

// The open records after a windowed snapshot's first part are read as the
// watcher takes its parts: changes committed meanwhile (records finished,
// moved, deleted, made, before and after the part they are in was read)
// each follow the snapshot, as do those to the window's finished records,
// read after the open ones; and the watcher that applies the parts, then
// the changes, holds every open record as the store holds it, and no
// record the store does not.
func TestWatchWindowChangesRacingThePartsAreNotLost(t *testing.T) {
	dir := t.TempDir()
	st, err := badger.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	var opened []*model.Task // oldest first
	for i := range 3*snapshotPart + 7 {
		opened = append(opened, storetest.Create(t, st, "", model.StatusWorking, storetest.T0.Add(time.Duration(i)*time.Second)))
	}
	var finished []*model.Task // newest first
	for i := range 20 {
		finished = append(finished, storetest.Create(t, st, "", model.StatusCompleted, storetest.T0.Add(-time.Duration(i+1)*time.Second)))
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	e := open(t, dir, startDemo(t, demo.Options{}), Options{})
	ctx := ctxT(t)
	f, err := e.WatchWindow(ctx, 0, deck.Window{Finished: 5})
	if err != nil {
		t.Fatal(err)
	}
	held := map[string]model.Status{}
	apply := func(ev deck.Event) {
		if ev.Kind != deck.EventSnapshot && ev.Kind != deck.EventSnapshotMore && ev.Kind != deck.EventChange {
			return // a poll state: no record
		}
		for _, en := range ev.Entries {
			held[en.Task.ID] = en.Task.Status
		}
		for _, id := range ev.Deleted {
			delete(held, id)
		}
	}
	snap := next(t, f, 5*time.Second, "the snapshot", func(ev deck.Event) bool { return ev.Kind == deck.EventSnapshot })
	if !snap.More || len(snap.Entries) > snapshotPart {
		t.Fatalf("the first part holds %d records (more: %v), want at most %d and more to come", len(snap.Entries), snap.More, snapshotPart)
	}
	apply(snap)
	finish := func(id string, to model.Status) {
		if _, err := e.store.Update(id, func(t *model.Task) (bool, error) { return true, t.MoveTo(to, "", time.Now()) }); err != nil {
			t.Fatal(err)
		}
	}
	// One change before each part is read: to records of the part sent,
	// of the next, and of the last.
	var last deck.Event
	for part := 0; snap.More && (part == 0 || last.More); part++ {
		switch part {
		case 0:
			finish(opened[len(opened)-1].ID, model.StatusCompleted)                  // in the part sent
			finish(opened[len(opened)-1-snapshotPart].ID, model.StatusInputRequired) // in the next
			finish(opened[0].ID, model.StatusFailed)                                 // in the last
			if err := e.store.Delete(opened[1].ID, model.EngineActor("test")); err != nil {
				t.Fatal(err)
			}
			// The window's newest finished record, read after the open ones.
			if err := e.store.Delete(finished[0].ID, model.EngineActor("test")); err != nil {
				t.Fatal(err)
			}
		case 1:
			storetest.Create(t, e.store, "", model.StatusWorking, time.Now())
			finish(opened[2].ID, model.StatusInputRequired)
		}
		last = next(t, f, 5*time.Second, "a part", func(ev deck.Event) bool { return ev.Kind == deck.EventSnapshotMore })
		if last.Rev != snap.Rev {
			t.Fatalf("a part at rev %d, want the snapshot's %d", last.Rev, snap.Rev)
		}
		apply(last)
	}
	// Then the changes: at a quiet moment the watcher holds what the store does.
	seen := snap.Rev
	waitFor(t, 20*time.Second, "the watcher to hold what the store holds", func() bool {
		rev := e.store.Revision()
		all, err := e.store.All()
		if err != nil {
			t.Fatal(err)
		}
		for seen < rev {
			select {
			case ev := <-f.Events():
				apply(ev)
				seen = max(seen, ev.Rev)
			case <-time.After(waitfor.Scale(5 * time.Second)):
				t.Fatalf("no event up to rev %d (last %d)", rev, seen)
			}
		}
		// Every open record, and the finished ones it holds (the
		// window's, and those that finished meanwhile), as stored.
		want := map[string]model.Status{}
		for _, r := range all {
			if _, ok := held[r.ID]; ok || !r.Status.Terminal() {
				want[r.ID] = r.Status
			}
		}
		return e.store.Revision() == rev && maps.Equal(held, want)
	})
}
