package ui

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/deck/decktest"
	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/internal/waitfor"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store/badger"
)

// seed writes records while taskdeck is away, concurrently so that they
// share the store's syncs.
func seed(t *testing.T, st *badger.Store, recs []*model.Task) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, len(recs))
	sem := make(chan struct{}, 64)
	for _, rec := range recs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := st.Create(rec); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// records makes n records of a status, created a millisecond apart.
func records(n int, st model.Status, taskID func(i int) string) []*model.Task {
	out := make([]*model.Task, n)
	for i := range out {
		rec := model.NewIntent(model.ServerRef{Name: "demo"}, "sleep", nil, "", time.Now().Add(-time.Hour+time.Duration(i)*time.Millisecond))
		rec.Status = st
		if taskID != nil {
			rec.TaskID = taskID(i)
		}
		out[i] = rec
	}
	return out
}

// The dashboard sends no tasks/get of its own: with the server asking
// for an hour between polls, the server sees the engine's one start-up
// poll however long the dashboard runs, keys pressed and clock moving,
// and `r` makes the engine poll within 200 ms.
func TestDashboardSendsNoPollOfItsOwn(t *testing.T) {
	var sleep *model.Task
	h := newHarnessWith(t, demo.Options{PollInterval: time.Hour}, func(h *harness) { sleep = h.call("sleep", `{"seconds":600}`) })
	h.until("the reconcile's report", func(m *Model) bool { return strings.HasPrefix(m.told(), "reconciled: 1 re-attached") })
	if n := h.demo.Stats().Gets; n != 1 {
		t.Fatalf("the server got %d tasks/get at start, want the engine's 1", n)
	}
	for range 10 {
		h.key("j", "k", "o", "enter", "esc", "/", "esc", "s", "esc")
	}
	before := lineWith(h.screen(), "sleep")
	for i := range 30 { // the clock moves (its next tick is the runtime's), and the age columns with it
		h.m.Update(tickMsg(time.Now().Add(time.Duration(i+1) * 5 * time.Second)))
	}
	if after := lineWith(h.screen(), "sleep"); after == before || !strings.Contains(after, "2m") {
		t.Fatalf("the age columns did not move with the clock:\n%s\n%s", before, after)
	}
	if n := h.demo.Stats().Gets; n != 1 {
		t.Fatalf("the server got %d tasks/get, want the engine's 1: the dashboard polls", n)
	}
	h.selectTask(sleep.ID)
	pressed := time.Now()
	h.key("r")
	h.within("r polls", 5*time.Second, func(m *Model) bool { return h.demo.Stats().Gets == 2 })
	if took, bound := time.Since(pressed), waitfor.Scale(200*time.Millisecond); took > bound {
		t.Fatalf("r took %v to poll, want within %v", took, bound)
	}
}

// A frame of 2,000 changes costs one sort of the table, not 2,000 moves.
func TestABatchOfChangesCostsOneSort(t *testing.T) {
	tasks := records(2000, model.StatusWorking, func(i int) string { return fmt.Sprint("remote-", i) })
	m := loaded(t, nil, 120, 30)
	var evs []deck.Event
	for i, task := range tasks {
		evs = append(evs, deck.Event{Kind: deck.EventChange, Rev: uint64(i + 2), Entries: []deck.Entry{{Task: task}}})
	}
	before := m.list.reorders
	m.Update(feedMsg{events: evs})
	if got := m.list.reorders - before; got != 1 || m.list.Len() != 2000 {
		t.Fatalf("2,000 changes in one frame cost %d reorders for %d rows, want 1 for 2,000", got, m.list.Len())
	}
	// A few changes go in row by row, without a sort.
	done := tasks[7].Clone()
	done.Status = model.StatusCompleted
	before = m.list.reorders
	m.Update(feedMsg{events: []deck.Event{{Kind: deck.EventChange, Rev: 3000, Entries: []deck.Entry{{Task: done}}}}})
	if got := m.list.reorders - before; got != 1 || m.list.counts[model.StatusCompleted] != 1 {
		t.Fatalf("one change cost %d reorders (completed: %d)", got, m.list.counts[model.StatusCompleted])
	}
}

// A burst of changes from the engine (a prune of 2,000 records, one
// change each) reaches the dashboard in a few frames, each one sort.
func TestABurstFromTheEngineIsBatchedByFrame(t *testing.T) {
	h := newHarness(t, func(h *harness) {
		h.offline(func(st *badger.Store) { seed(t, st, records(2000, model.StatusCompleted, nil)) })
	})
	// The first frame holds a page of them; the rest come in pages.
	h.until("2,000 rows", func(m *Model) bool { return m.list.Len() == 2000 && m.hidden == 0 })
	frames, reorders := h.m.frames, h.m.list.reorders
	h.key("p", "y")
	h.until("pruned", func(m *Model) bool { return m.list.Len() == 0 })
	frames, reorders = h.m.frames-frames, h.m.list.reorders-reorders
	t.Logf("2,000 deletions in %d frames, %d reorders", frames, reorders)
	if frames > 100 || reorders > frames*fewChanges {
		t.Fatalf("2,000 deletions took %d frames and %d reorders; want a few frames, each one sort or a few moves", frames, reorders)
	}
}

// While the start-up reconcile runs the header says how far it got; when
// it is over the status line has its report.
func TestReconcileProgressThenReport(t *testing.T) {
	m := loaded(t, nil, 120, 30)
	m.Update(feedMsg{events: []deck.Event{{Kind: deck.EventReconcile, Reconcile: &deck.Reconcile{Total: 2000, Done: 812, Reattached: 800, Unknown: 12}}}})
	if l := strings.Split(screenOf(m), "\n")[0]; !strings.Contains(l, "reconciling 812/2000 …") {
		t.Fatalf("header while reconciling: %q", l)
	}
	m.Update(feedMsg{events: []deck.Event{{Kind: deck.EventReconcile, Reconcile: &deck.Reconcile{Total: 2000, Done: 2000, Reattached: 1980, Unknown: 20, Over: true}}}})
	if l := strings.Split(screenOf(m), "\n")[0]; strings.Contains(l, "reconciling") {
		t.Fatalf("header after the reconcile: %q", l)
	}
	if want := "reconciled: 1980 re-attached · 0 finished meanwhile · 20 unknown · 0 orphaned · 0 unreachable"; m.told() != want {
		t.Fatalf("status line %q, want %q", m.told(), want)
	}
}

// 2,000 open tasks the server does not know: the reconcile shows its
// progress on screen while it runs, then its report. (The engine's tests
// hold it to 3 s; here the bound leaves room for a busy machine.)
func TestReconcileOf2000TasksShowsProgress(t *testing.T) {
	h := newHarness(t, func(h *harness) {
		h.offline(func(st *badger.Store) {
			seed(t, st, records(2000, model.StatusWorking, func(i int) string { return fmt.Sprint("no-such-task-", i) }))
		})
	})
	start, limit := time.Now(), 10*time.Second
	if raceEnabled {
		limit *= 5
	}
	progress := ""
	h.within("the reconcile's report", limit, func(m *Model) bool {
		if l := strings.Split(h.screen(), "\n")[0]; progress == "" && strings.Contains(l, "reconciling") && !strings.Contains(l, " 0/2000") {
			progress = l
		}
		return strings.HasPrefix(m.told(), "reconciled:")
	})
	t.Logf("reconciled 2,000 tasks in %v; progress seen: %q", time.Since(start), progress)
	if progress == "" {
		t.Fatal("no progress was shown while the reconcile ran")
	}
	if want := "reconciled: 0 re-attached · 0 finished meanwhile · 2000 unknown"; !strings.HasPrefix(h.m.told(), want) {
		t.Fatalf("report %q, want %q…", h.m.told(), want)
	}
}

// A feed that ends with an error is said so in the status line and
// watched again from the last revision seen: what changed meanwhile
// shows, nothing twice.
func TestAFeedThatEndsIsWatchedAgainFromItsLastRevision(t *testing.T) {
	d := decktest.New(nil)
	h := newDeckHarness(t, d, Options{})
	sleep := deck.CallRequest{Server: h.ref, Tool: "sleep"}
	first, err := d.Call(t.Context(), sleep)
	if err != nil {
		t.Fatal(err)
	}
	h.until("the first call's row", func(m *Model) bool { return h.status(first.Task.ID) == model.StatusWorking })
	seen := h.m.feed.from()
	d.Cut(&deck.Error{Kind: deck.KindOwnerGone, Message: "the owner went away"})
	h.until("the status line says the feed ended", func(m *Model) bool {
		return len(m.notices) > 0 && m.notices[len(m.notices)-1].err &&
			strings.Contains(m.told(), "the owner went away") && strings.Contains(m.told(), "watching again")
	})
	second, err := d.Call(t.Context(), sleep) // while nobody watches
	if err != nil {
		t.Fatal(err)
	}
	h.until("the second call's row", func(m *Model) bool { return h.status(second.Task.ID) == model.StatusWorking })
	if w := d.Watches(); len(w) != 2 || w[0] != 0 || w[1] != seen || seen == 0 {
		t.Fatalf("watched from %v, want from 0, then from %d (the last revision seen)", w, seen)
	}
	if n := h.m.list.Len(); n != 2 {
		t.Fatalf("%d rows after watching again, want 2", n)
	}
}

// A new call is checked against the tool list first: one the server's
// tools rule out sends nothing and leaves no record.
func TestANewCallIsCheckedFirst(t *testing.T) {
	h := newHarness(t, nil)
	msg := call(context.Background(), h.eng, &newCall{server: "demo", tool: "no-such-tool"})()
	up, ok := msg.(taskUpdatedMsg)
	if !ok || deck.KindOf(up.err) != deck.KindUsage {
		t.Fatalf("a call of an unknown tool gave %#v, want a usage error", msg)
	}
	h.send(msg)
	if !h.m.flashErr || !strings.Contains(h.m.flash, "no-such-tool") {
		t.Fatalf("status line %q does not name the tool", h.m.flash)
	}
	if n := len(h.demo.Stats().ToolCalls); n != 0 || len(h.records()) != 0 {
		t.Fatalf("the refused call sent %d tools/call or left a record", n)
	}
}

// Changes that keep coming are applied at most once per frame: 60 calls
// made one after another (a few changes each) while the dashboard runs.
func TestChangesAreAppliedAtMostOncePerFrame(t *testing.T) {
	h := newHarness(t, nil)
	frames := h.m.frames
	start := time.Now()
	errs := make(chan error, 1)
	go func() {
		for range 60 {
			if _, err := h.eng.Call(context.Background(), deck.CallRequest{Server: h.ref, Tool: "echo", Args: []byte(`{"text":"x"}`)}); err != nil {
				errs <- err
				return
			}
		}
		errs <- nil
	}()
	h.until("60 rows", func(m *Model) bool { return m.list.counts[model.StatusCompleted] == 60 })
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	took, n := time.Since(start), h.m.frames-frames
	t.Logf("60 calls in %v: %d frames", took, n)
	if most := int(took/frameEvery) + 2; n > most {
		t.Fatalf("%d frames in %v: more than one per frame (at most %d)", n, took, most)
	}
}

// Cancelling 12 marked tasks shows on their rows within a second.
func TestACancelOfTwelveShowsWithinASecond(t *testing.T) {
	h := newHarness(t, func(h *harness) {
		for range 12 {
			h.call("sleep", `{"seconds":600}`)
		}
	})
	h.m.cursor = 0
	for range 12 {
		h.key("space")
	}
	h.key("c")
	if !strings.Contains(h.screen(), "Cancel 12 tasks on the server?") {
		t.Fatalf("the question:\n%s", h.screen())
	}
	limit := time.Second
	if raceEnabled {
		limit *= 5
	}
	h.key("y")
	h.within("12 rows cancelled", limit, func(m *Model) bool { return m.list.counts[model.StatusCancelled] == 12 })
	if n := h.demo.Stats().Cancels; n != 12 {
		t.Fatalf("the server got %d tasks/cancel, want 12", n)
	}
}
