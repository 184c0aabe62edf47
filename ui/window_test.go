package ui

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"
	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/deck/decktest"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store/badger"
)

// On a store with more finished tasks than the dashboard reads at first,
// the header counts the whole store, the footer says how many are left
// out, and G (the cursor on the last row) reads the next page, under the
// cursor, until every task is in the table.
func TestWindowGReachesEveryRecord(t *testing.T) {
	done := records(2500, model.StatusCompleted, nil)
	h := newHarness(t, func(h *harness) {
		h.opts.Recent = 1000
		h.offline(func(st *badger.Store) { seed(t, st, done) })
	})
	if n := h.m.list.Len(); n != 1000 || h.m.hidden != 1500 {
		t.Fatalf("first frame holds %d rows, %d left out; want 1000 and 1500", n, h.m.hidden)
	}
	s := h.screen()
	if !strings.Contains(s, "2500 completed") || !strings.Contains(s, "(+1500 older finished not shown)") {
		t.Fatalf("the header counts the store and the footer says what is left out:\n%s", s)
	}
	for _, want := range []int{2000, 2500} {
		h.key("G")
		h.until(fmt.Sprintf("%d rows", want), func(m *Model) bool { return m.list.Len() == want && !m.pages.busy })
	}
	h.key("G") // the page came under the cursor: G again goes to its end
	if h.m.hidden != 0 || h.m.selectedID() != done[0].ID {
		t.Fatalf("after G: %d left out, on %s; want none, on the oldest %s", h.m.hidden, h.m.selectedID(), done[0].ID)
	}
	if s := h.screen(); !strings.Contains(s, "2500/2500") || strings.Contains(s, "not shown") {
		t.Fatalf("at the end:\n%s", s)
	}
}

// A search for a task older than what the dashboard holds pages through
// the store until it finds it.
func TestWindowSearchReachesOlderRecords(t *testing.T) {
	done := records(2500, model.StatusCompleted, nil)
	done[3].Tool = "needle"
	h := newHarness(t, func(h *harness) {
		h.opts.Recent = 1000
		h.offline(func(st *badger.Store) { seed(t, st, done) })
	})
	if _, held := h.m.list.Get(done[3].ID); held {
		t.Fatal("the old task is held before the search")
	}
	h.key("/")
	h.typeText("needle")
	h.until("the old task found", func(m *Model) bool { return len(m.list.visible) == 1 && m.list.visible[0].task.ID == done[3].ID })
}

// A search for a finished status older than the window reads that
// status's index a page at a time, not every finished task: the 1,500
// older completed tasks are neither read nor held.
func TestWindowSearchOfAStatusReadsItsIndexOnly(t *testing.T) {
	done := append(records(5, model.StatusFailed, nil), records(2500, model.StatusCompleted, nil)...)
	d := decktest.New(nil)
	d.Put(done...)
	h := newDeckHarness(t, d, Options{Recent: 1000})
	h.key("/")
	h.m.filter.SetValue("status:faile") // pasted: no search for each letter
	h.typeText("d")
	h.until("the 5 failed tasks found", func(m *Model) bool { return len(m.list.visible) == 5 && !m.pages.busy })
	if n := h.m.list.Len(); n != 1005 || h.m.hidden != 1500 {
		t.Fatalf("the list holds %d tasks and leaves %d out, want the window's 1000 and the 5 found, and 1500", n, h.m.hidden)
	}
	for _, f := range d.Lists() {
		if !slices.Equal(f.Statuses, []model.Status{model.StatusFailed}) || len(f.Groups) > 0 {
			t.Fatalf("the dashboard asked for %+v, want only pages of failed tasks", f)
		}
	}
	if s := h.screen(); !strings.Contains(s, "5 failed") {
		t.Fatalf("the header counts the store's failed tasks:\n%s", s)
	}
}

// A view that shows no finished task (the open group) reads no page of
// them, wherever the cursor is.
func TestWindowOpenGroupReadsNoFinishedPage(t *testing.T) {
	done := records(1500, model.StatusCompleted, nil)
	h := newHarness(t, func(h *harness) {
		h.opts.Recent = 1000
		h.offline(func(st *badger.Store) { seed(t, st, done) })
	})
	for _, k := range []string{"1", "G"} {
		h.key(k)
		if h.m.pages.busy {
			t.Fatalf("after %s in the open group the dashboard reads a page of finished tasks", k)
		}
	}
}

// The first part of the engine's snapshot is drawn at once: the count
// line counts the whole store and the table shows the newest open tasks,
// the older ones filling it in as their parts come; mark all waits for
// the last part, which leaves every task in the table.
func TestWindowFirstPartIsDrawnAtOnce(t *testing.T) {
	open := records(3*256+10, model.StatusWorking, func(i int) string { return fmt.Sprintf("t%d", i) })
	for _, r := range open {
		r.Server = model.ServerRef{Name: "elsewhere"} // not configured: nothing polls them
	}
	done := records(50, model.StatusCompleted, nil)
	h := newHarness(t, func(h *harness) {
		h.offline(func(st *badger.Store) { seed(t, st, append(open, done...)) })
	})
	// A dashboard that is handed the engine's events one part at a time.
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	h.m = New(ctx, Options{Deck: h.eng})
	h.send(tea.WindowSizeMsg{Width: 120, Height: 30})
	f, err := h.eng.WatchWindow(ctx, 0, deck.Window{Finished: 10})
	if err != nil {
		t.Fatal(err)
	}
	part := func() deck.Event {
		for ev := range f.Events() {
			if ev.Kind == deck.EventSnapshot || ev.Kind == deck.EventSnapshotMore {
				return ev
			}
		}
		t.Fatalf("the feed ended: %v", f.Err())
		return deck.Event{}
	}
	first := part()
	h.send(feedMsg{events: []deck.Event{first}})
	s := h.screen()
	if !strings.Contains(s, "778 working") || !strings.Contains(s, "50 completed") || !strings.Contains(s, "0 all 828") ||
		!strings.Contains(s, "loading the open tasks") || h.m.list.visible[0].task.ID != open[len(open)-1].ID {
		t.Fatalf("after the first part, want the store's counts, the newest open task first and that the rest is loading:\n%s", s)
	}
	if n := h.m.list.Len(); n != len(first.Entries) {
		t.Fatalf("after the first part the table holds %d rows, want its %d", n, len(first.Entries))
	}
	h.key("ctrl+a")
	if len(h.m.marked) != 0 || !strings.Contains(h.screen(), "still loading") {
		t.Fatalf("mark all while the open tasks load marked %d tasks:\n%s", len(h.m.marked), h.screen())
	}
	// The oldest open task, in the last part, is forgotten before that
	// part is read: its deletion, after the parts, leaves the finished
	// tasks beyond the window as they were.
	if err := h.eng.Forget(ctx, open[0].ID); err != nil {
		t.Fatal(err)
	}
	for ev := first; ev.More; {
		ev = part()
		h.send(feedMsg{events: []deck.Event{ev}})
	}
	if n := h.m.list.Len(); n != len(open)-1+10 {
		t.Fatalf("after the last part the table holds %d rows, want every open task left and the window's 10 finished: %d", n, len(open)-1+10)
	}
	if s := h.screen(); strings.Contains(s, "loading the open tasks") {
		t.Fatalf("after the last part:\n%s", s)
	}
	for ev := range f.Events() {
		h.send(feedMsg{events: []deck.Event{ev}})
		if slices.Contains(ev.Deleted, open[0].ID) {
			break
		}
	}
	if s := h.screen(); !strings.Contains(s, "777 working") || !strings.Contains(s, "50 completed") {
		t.Fatalf("after the deletion of an open task the parts had not reached, want 777 working and 50 completed:\n%s", s)
	}
	h.key("ctrl+a")
	if len(h.m.marked) != h.m.list.Len() {
		t.Fatalf("mark all after the last part marked %d tasks, want the %d shown", len(h.m.marked), h.m.list.Len())
	}
}
