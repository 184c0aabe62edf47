package ui

import (
	"testing"

	tea "charm.land/bubbletea/v2"
)

// A click selects the row under it, the wheel moves three rows, and a
// click over a question answers nothing.
func TestClickSelectsAndWheelScrolls(t *testing.T) {
	m := loaded(t, sampleTasks(), 80, 24)
	if v := m.View(); v.MouseMode != tea.MouseModeCellMotion {
		t.Fatalf("mouse mode %v", v.MouseMode)
	}
	m.Update(tea.MouseClickMsg{Button: tea.MouseLeft, Y: headerLines + 4})
	if m.cursor != 4 {
		t.Fatalf("a click on the fifth row put the cursor on %d", m.cursor)
	}
	m.Update(tea.MouseClickMsg{Button: tea.MouseLeft, Y: 0})
	m.Update(tea.MouseClickMsg{Button: tea.MouseLeft, Y: 20}) // under the last row
	if m.cursor != 4 {
		t.Fatalf("a click off the rows moved the cursor to %d", m.cursor)
	}
	m.Update(tea.MouseWheelMsg{Button: tea.MouseWheelDown})
	if m.cursor != 7 {
		t.Fatalf("the wheel moved the cursor to %d, want 7", m.cursor)
	}
	m.Update(tea.MouseWheelMsg{Button: tea.MouseWheelUp})
	if m.cursor != 4 {
		t.Fatalf("the wheel moved the cursor to %d, want 4", m.cursor)
	}
	press(m, "d")
	m.Update(tea.MouseClickMsg{Button: tea.MouseLeft, Y: 5})
	if m.mode() != modeConfirm || m.cursor != 4 {
		t.Fatal("a click over a question acted")
	}
}
