package ui

import (
	"fmt"

	tea "charm.land/bubbletea/v2"

	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/termtext"
)

// notifyMeMark is drawn in the mark column of a row whose changes ring
// the bell (a marked row shows its * instead).
const notifyMeMark = "+"

// movedTask is a task of notifyMe whose status changed from from.
type movedTask struct {
	task *model.Task
	from model.Status
}

// toggleNotifyMe asks (or stops asking) to be told when the selected
// task's status changes: the bell and a desktop notification, once per
// change, until it ends.
func (m *Model) toggleNotifyMe() {
	t := m.selected()
	if t == nil {
		return
	}
	short := m.list.shortID(t.ID)
	switch {
	case m.notifyMe[t.ID]:
		delete(m.notifyMe, t.ID)
		m.say("task " + short + ": no longer notifying of its changes")
	case t.Status.Terminal():
		m.say("task " + short + " has ended (" + string(t.Status) + "): it will not change again")
	default:
		m.notifyMe[t.ID] = true
		m.say(fmt.Sprintf("task %s: the bell and a desktop notification when its status changes (%s again stops)", short, m.keys.NotifyMe.Help().Key))
	}
}

// notifyMoved rings the bell once, with a desktop notification of each
// moved task, and says the last in the status line; a task that ended
// asks nothing more.
func (m *Model) notifyMoved(moved []movedTask) tea.Cmd {
	out := "\a"
	for _, mv := range moved {
		t := mv.task
		text := fmt.Sprintf("taskdeck: %s %s → %s", termtext.Line(t.Tool), mv.from, t.Status)
		if m.opts.Desktop != nil {
			out += m.opts.Desktop(text)
		}
		m.tell(fmt.Sprintf("%s (task %s) is now %s", termtext.Line(t.Tool), m.list.shortID(t.ID), t.Status))
		if t.Status.Terminal() {
			delete(m.notifyMe, t.ID)
		}
	}
	return tea.Raw(out)
}
