package ui

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store/badger"
)

// `a` on a found row asks Adopt or Leave: left, the row says left (the
// act naming who); adopted, its history says it was adopted and it is
// polled (the demo server does not know the task: it ends unknown).
func TestFoundRowAdoptedOrLeft(t *testing.T) {
	var keep, drop *model.Task
	h := newHarness(t, func(h *harness) {
		h.offline(func(st *badger.Store) {
			now := time.Now()
			keep = model.NewFound(h.ref, model.Snapshot{TaskID: "listed-1", Protocol: "2025-11-25", Status: model.StatusWorking}, now.Add(-time.Second))
			drop = model.NewFound(h.ref, model.Snapshot{TaskID: "listed-2", Protocol: "2025-11-25", Status: model.StatusWorking}, now)
			seed(t, st, []*model.Task{keep, drop})
		})
	})
	h.until("the found rows", func(m *Model) bool { return m.list.Len() == 2 })
	if s := h.screen(); !strings.Contains(s, "◇ found") || !strings.Contains(s, "lists this task working") {
		t.Fatalf("the found rows do not show as found with what the server lists:\n%s", s)
	}
	h.key("a") // the newest, drop, is selected
	if s := h.screen(); !strings.Contains(s, "Adopt") || !strings.Contains(s, "Leave") {
		t.Fatalf("a on a found row does not ask Adopt or Leave:\n%s", s)
	}
	h.key("right", "right", "enter")
	h.until("the row left", func(m *Model) bool {
		got, _ := m.list.Get(drop.ID)
		return got.Status == model.StatusLeft && got.Act != nil && got.Act.Kind == model.ActLeave
	})
	h.key("j", "a", "right", "enter")
	h.until("the row adopted and polled", func(m *Model) bool {
		got, _ := m.list.Get(keep.ID)
		return got.Status == model.StatusUnknown && slices.ContainsFunc(got.History, func(tr model.Transition) bool {
			return tr.From == model.StatusFound && tr.Message == model.FoundAdopted && !tr.By.IsZero()
		})
	})
}
