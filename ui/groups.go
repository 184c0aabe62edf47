package ui

import (
	"fmt"
	"slices"
	"strings"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/model"
)

// inGroup reports whether a row is in the list's group view.
func (l *taskList) inGroup(r *row) bool {
	return l.group.Holds(r.status, r.waits, l.group.PollsFailing && l.pollFails(r))
}

// pollFails reports whether an open row's last poll failed. A poll's
// outcome can come after the change that ended its task (its copy of the
// record is older): it then counts for nothing, here as in the table.
func (l *taskList) pollFails(r *row) bool { return r.status.Pollable() && l.failing[r.task.ID] }

// groupCount is how many tasks a group holds, from the counts kept as
// rows come and go (no pass over the rows).
func (l *taskList) groupCount(g deck.Group) int {
	n := 0
	for _, st := range g.Statuses {
		n += l.stored(st)
	}
	if g.Waiting {
		n = l.waiting // the waiting rows are input_required ones
	}
	if g.PollsFailing {
		for id := range l.failing {
			if r, ok := l.byID[id]; ok && l.pollFails(r) && !slices.Contains(g.Statuses, r.task.Status) {
				n++
			}
		}
	}
	return n
}

// setGroup shows one group (nil: every task); the inbox sorts its own
// rows (refilter), the order of every row stays.
func (l *taskList) setGroup(g *deck.Group) {
	l.group = g
	l.refilter()
}

// setPoll keeps a task's poll state, and whether its polls fail.
func (m *Model) setPoll(t *model.Task, p deck.PollState) {
	m.polls[t.ID] = p
	failing := t.Pollable() && p.Errors > 0
	if m.list.failing[t.ID] == failing {
		return
	}
	if failing {
		m.list.failing[t.ID] = true
	} else {
		delete(m.list.failing, t.ID)
	}
	m.failingMoved = true
}

// clearPolls forgets every poll state (a snapshot brings them all).
func (m *Model) clearPolls() {
	clear(m.polls)
	clear(m.list.failing)
}

// afterPolls re-filters the problems view when polls began or stopped
// failing: no row changed, but which rows it admits did.
func (m *Model) afterPolls() {
	if !m.failingMoved {
		return
	}
	m.failingMoved = false
	if g := m.list.group; g != nil && g.PollsFailing {
		selected := m.selectedID()
		m.list.refilter()
		m.keepSelected(selected)
	}
}

// toggleGroup shows group i, or every task if it is shown already (its
// key again).
func (m *Model) toggleGroup(i int) {
	if g := m.list.group; g != nil && g.Name == deck.Groups[i].Name {
		m.showGroup(nil)
		return
	}
	m.showGroup(&deck.Groups[i])
}

// toggleTimes shows times as clock times or as ages.
func (m *Model) toggleTimes() {
	m.absTimes = !m.absTimes
	m.say(map[bool]string{true: "times: absolute (t: relative)", false: "times: relative (t: absolute)"}[m.absTimes])
}

// showGroup shows one group (nil: every task); the status filter gives way.
func (m *Model) showGroup(g *deck.Group) {
	selected := m.selectedID()
	m.statusFilter = ""
	m.list.status = ""
	m.list.setGroup(g)
	m.cursor = max(m.list.IndexOf(selected), 0)
	m.clampCursor()
	if g == nil {
		m.say("showing every group")
		return
	}
	what := "showing " + g.Title
	if g.Waiting {
		what += ": who waited longest first; a answers, enter shows what was asked"
	}
	m.say(what)
}

// viewGroups is the group tabs, each with its key, name and count; the
// group shown is in brackets (and reversed where there is style).
func (m *Model) viewGroups() string {
	tab := func(k, title string, n int, on bool) string {
		s := fmt.Sprintf("%s %s %d", k, title, n)
		if on {
			return m.styles.Selected.Render("[" + s + "]")
		}
		return " " + s + " "
	}
	parts := []string{tab("0", "all", m.storedAll(), m.list.group == nil)}
	for i, g := range deck.Groups {
		// The tab says the group's name, as `ls --status` takes it.
		s := tab(fmt.Sprint(i+1), g.Name, m.list.groupCount(g), m.list.group != nil && m.list.group.Name == g.Name)
		if g.PollsFailing && m.list.groupCount(g) > 0 && (m.list.group == nil || m.list.group.Name != g.Name) {
			s = m.styles.Error.Render(s)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "")
}
