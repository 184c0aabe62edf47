package ui

import (
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/present"
)

// answerByText is the detail pane's line of a wait's deadline (issue 27):
// the countdown beside the server's TTL, and a warning when the TTL ends
// first (the task would end before anyone must answer).
func (m *Model) answerByText(t *model.Task) string {
	d := m.polls[t.ID].AnswerBy
	s := present.AnswerBy(t, d, m.now)
	if w := present.TTLBeforeDeadline(t, d); w != "" {
		s += "\n" + m.styles.Error.Render("! "+w)
	}
	return s
}

// tickDetail renders the detail pane again on the clock's tick, so that
// its countdowns (the deadline's, the TTL's, the wait's) move.
func (m *Model) tickDetail() {
	if m.detail == nil {
		return
	}
	if t, ok := m.list.Get(m.detail.id); ok {
		m.detail.vp.SetContent(m.detailText(t))
	}
}
