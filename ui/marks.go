package ui

import (
	"errors"
	"fmt"

	"github.com/taskdeck/taskdeck/model"
)

// Marks say what an action acts on besides the selected task; only the
// marked tasks the filter shows are ever acted on (targets).

// toggleMark marks or unmarks the selected task and moves on; it is
// where the next range mark starts.
func (m *Model) toggleMark() {
	id := m.selectedID()
	if id == "" {
		return
	}
	if m.marked[id] {
		delete(m.marked, id)
	} else {
		m.marked[id] = true
	}
	m.anchor = id
	m.marks.changes++
	m.moveCursor(1)
}

// markRange marks every task shown between the last one marked with
// space (or the first row) and the selected one, both included.
func (m *Model) markRange() {
	if len(m.list.visible) == 0 {
		return
	}
	from := m.list.IndexOf(m.anchor)
	if from < 0 {
		from = 0
	}
	lo, hi := min(from, m.cursor), max(from, m.cursor)
	for _, r := range m.list.visible[lo : hi+1] {
		m.marked[r.task.ID] = true
	}
	m.anchor = m.selectedID()
	m.marks.changes++
	m.say(fmt.Sprintf("marked %d tasks (rows %d to %d)", hi-lo+1, lo+1, hi+1))
}

// markAll marks every task shown: with a filter or a status filter set,
// it marks by filter.
func (m *Model) markAll() {
	if m.filling != nil { // the tasks shown are not all in yet
		m.fail(errors.New("the open tasks are still loading: mark all once the count line no longer says so"))
		return
	}
	for _, r := range m.list.visible {
		m.marked[r.task.ID] = true
	}
	m.marks.changes++
	m.say(fmt.Sprintf("marked all %d tasks shown (%s clears the marks)", len(m.list.visible), m.keys.ClearMarks.Help().Key))
}

func (m *Model) clearMarks() {
	if n := len(m.marked); n > 0 {
		clear(m.marked)
		m.say(fmt.Sprintf("cleared %d marks", n))
	}
	m.anchor = ""
	m.marks.changes++
}

// marksCount keeps the count of marked tasks the filter hides, which the
// footer shows on every frame: with 100,000 marked, counting them again
// each frame would cost more than the frame.
type marksCount struct {
	changes int // of the marks: counts toggles, ranges, mark all, clear
	at      marksState
	hidden  int
}

// marksState is what the count depends on: the marks, the rows (a frame
// of the feed changes them, and deletes their marks), the filter.
type marksState struct {
	changes, marked, frames int
	filter                  string
	status                  model.Status
}

// hiddenMarks counts the marked tasks the filter hides.
func (m *Model) hiddenMarks() int {
	now := marksState{m.marks.changes, len(m.marked), m.frames, m.filter.Value(), m.statusFilter}
	if now != m.marks.at {
		n := 0
		for id := range m.marked {
			if r, ok := m.list.byID[id]; !ok || !m.list.matches(r) {
				n++
			}
		}
		m.marks.at, m.marks.hidden = now, n
	}
	return m.marks.hidden
}
