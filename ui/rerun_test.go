package ui

import (
	"strings"
	"testing"

	"github.com/taskdeck/taskdeck/model"
)

// A failed task re-runs, after a question that defaults to No, as a new
// record of the same tool and arguments that names the one it repeats;
// the status line names the new record by its id (R, item 15).
func TestRerunOfAFailedTaskIsANewRecordThatNamesIt(t *testing.T) {
	var failed *model.Task
	h := newHarness(t, func(h *harness) { failed = h.call("fail", `{"mode":"error"}`) })
	h.until("the task failed", func(m *Model) bool { return h.status(failed.ID) == model.StatusFailed })
	h.selectTask(failed.ID)
	h.key("R")
	if s := h.screen(); !strings.Contains(s, "Re-run 1 task?") || !strings.Contains(s, failed.ID) {
		t.Fatalf("the question:\n%s", s)
	}
	h.key("enter") // No is chosen first
	if len(h.records()) != 1 || h.demo.Stats().ToolCalls["fail"] != 1 {
		t.Fatal("enter on a fresh question re-ran the task")
	}
	h.key("R", "y")
	h.until("the new record", func(m *Model) bool { return m.list.Len() == 2 && m.bulk == nil })
	var again *model.Task
	for _, e := range h.records() {
		if e.Task.ID != failed.ID {
			again = e.Task
		}
	}
	if again.Repeats != failed.ID || again.Tool != "fail" || string(again.Arguments) != `{"mode":"error"}` {
		t.Fatalf("the re-run: repeats %q, tool %q, args %s", again.Repeats, again.Tool, again.Arguments)
	}
	if n := h.demo.Stats().ToolCalls["fail"]; n != 2 {
		t.Fatalf("the server got %d calls of fail, want 2", n)
	}
	if !strings.Contains(h.m.flash, "re-ran task "+failed.ID+": the new record is task "+again.ID) {
		t.Fatalf("the status line says %q", h.m.flash)
	}
	h.until("the cursor on the re-run", func(m *Model) bool { return m.selectedID() == again.ID })
	h.key("enter")
	if l := lineWith(h.screen(), "repeats"); !strings.Contains(l, failed.ID) {
		t.Fatalf("the detail pane does not name the task it repeats:\n%s", h.screen())
	}
}

// An orphaned task's detail pane offers re-run or forget, and R works
// from there; a working task is not re-run.
func TestOrphanedDetailOffersRerunOrForget(t *testing.T) {
	tasks := sampleTasks()
	m := loaded(t, tasks, 120, 40)
	var orphan, working *model.Task
	for _, tk := range tasks {
		switch tk.Status {
		case model.StatusOrphaned:
			orphan = tk
		case model.StatusWorking:
			working = tk
		}
	}
	m.cursor = m.list.IndexOf(working.ID)
	press(m, "R")
	if m.question != nil || !strings.Contains(m.flash, "nothing to re-run") {
		t.Fatalf("R on a working task: %q", m.flash)
	}
	m.cursor = m.list.IndexOf(orphan.ID)
	press(m, "enter")
	s := screenOf(m)
	if !strings.Contains(s, "What now") || !strings.Contains(s, "R: re-run it, a new call of migrate") || !strings.Contains(s, "d: forget this record") {
		t.Fatalf("the detail pane of an orphaned task:\n%s", s)
	}
	press(m, "R")
	if m.mode() != modeConfirm || !strings.Contains(screenOf(m), "Re-run 1 task?") {
		t.Fatalf("R in the detail pane:\n%s", screenOf(m))
	}
}

// Several re-runs name their new records, three at most.
func TestIDListIsBounded(t *testing.T) {
	if got := idList([]string{"a", "b", "c", "d", "e"}, maxNamed); got != "a, b, c and 2 more" {
		t.Fatalf("idList: %q", got)
	}
	if got := idList([]string{"a", "b"}, maxNamed); got != "a, b" {
		t.Fatalf("idList: %q", got)
	}
}
