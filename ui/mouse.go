package ui

import tea "charm.land/bubbletea/v2"

// wheelStep is the rows one turn of the wheel scrolls.
const wheelStep = 3

// onMouse selects the row clicked and scrolls with the wheel, in the
// table; in the detail pane the wheel scrolls the pane. Over anything
// else the mouse does nothing: a click never answers a question.
func (m *Model) onMouse(msg tea.MouseMsg) {
	mouse := msg.Mouse()
	switch m.mode() {
	case modeTable:
		switch msg.(type) {
		case tea.MouseClickMsg:
			// The rows start under the counts line and the column titles.
			if i := m.top + mouse.Y - headerLines; mouse.Button == tea.MouseLeft && mouse.Y >= headerLines && i < min(m.top+m.tableHeight(), len(m.list.visible)) {
				m.cursor = i
				m.clampCursor()
			}
		case tea.MouseWheelMsg:
			switch mouse.Button {
			case tea.MouseWheelUp:
				m.moveCursor(-wheelStep)
			case tea.MouseWheelDown:
				m.moveCursor(wheelStep)
			}
		}
	case modeDetail:
		if w, ok := msg.(tea.MouseWheelMsg); ok {
			m.detail.vp, _ = m.detail.vp.Update(w)
		}
	}
}
