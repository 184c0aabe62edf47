package ui

import (
	"fmt"
	"strings"
	"testing"

	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store"
)

// On a store with more finished tasks than the dashboard reads at first,
// the header counts the whole store, the footer says how many are left
// out, and G (the cursor on the last row) reads the next page, under the
// cursor, until every task is in the table.
func TestWindowGReachesEveryRecord(t *testing.T) {
	done := records(2500, model.StatusCompleted, nil)
	h := newHarness(t, func(h *harness) {
		h.opts.Recent = 1000
		h.offline(func(st *store.Store) { seed(t, st, done) })
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
		h.offline(func(st *store.Store) { seed(t, st, done) })
	})
	if _, held := h.m.list.Get(done[3].ID); held {
		t.Fatal("the old task is held before the search")
	}
	h.key("/")
	h.typeText("needle")
	h.until("the old task found", func(m *Model) bool { return len(m.list.visible) == 1 && m.list.visible[0].task.ID == done[3].ID })
}
