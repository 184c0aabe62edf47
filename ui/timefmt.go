package ui

import (
	"time"

	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/present"
)

// when is a time as the table shows it: how long ago (or, for a time to
// come, how long until), or with t the clock time: 15:04 today, the day
// (01-02) before. Both fit five cells.
func (m *Model) when(at time.Time) string {
	if !m.absTimes {
		if at.After(m.now) {
			return present.Age(at.Sub(m.now))
		}
		return present.Age(m.now.Sub(at))
	}
	at, now := at.Local(), m.now.Local()
	if y, mo, d := at.Date(); y == now.Year() && mo == now.Month() && d == now.Day() {
		return at.Format("15:04")
	}
	return at.Format("01-02")
}

// expiryWarning is how long before a server drops an open task it is
// flagged: a fifth of its TTL, at least a minute.
func expiryWarning(ttl time.Duration) time.Duration { return max(ttl/5, time.Minute) }

// expiry is when the server drops a task (createdAt + ttl, where the
// server set a TTL): the EXP cell, and whether it warns (open work that
// expires soon, or has expired). Finished tasks expire too: their result
// is gone from the server then, though taskdeck keeps its copy.
func (m *Model) expiry(t *model.Task) (cell string, warn bool) {
	at := t.Deadline()
	if at.IsZero() {
		return "", false
	}
	left := at.Sub(m.now)
	open := !t.Status.Terminal()
	warn = open && left < expiryWarning(model.Millis(*t.TTLMs))
	switch {
	case left <= 0:
		cell = "gone"
	default:
		cell = m.when(at)
	}
	if warn {
		cell = "!" + cell
	}
	return cell, warn
}

// expiryText is the detail pane's line: when, how far, and the warning.
func (m *Model) expiryText(t *model.Task) string {
	at := t.Deadline()
	if at.IsZero() {
		return ""
	}
	s := "in " + present.Age(at.Sub(m.now)) + " (" + at.Local().Format(time.DateTime) + ", ttl " + model.Millis(*t.TTLMs).String() + ")"
	if !at.After(m.now) {
		s = "expired " + present.Age(m.now.Sub(at)) + " ago (" + at.Local().Format(time.DateTime) + "): the server may have dropped it"
	}
	if _, warn := m.expiry(t); warn && at.After(m.now) {
		s += "\n" + m.styles.Error.Render("! expires soon: it becomes unknown if still open then")
	}
	return s
}

// expiringSoon counts the open tasks that expire soon (or have expired):
// the header's warning. It counts on the clock's tick, with the health.
func (m *Model) expiringSoon() int {
	n := 0
	for id := range m.polls {
		if r, ok := m.list.byID[id]; ok {
			if _, warn := m.expiry(r.task); warn {
				n++
			}
		}
	}
	return n
}

// ago is an absolute time with how long ago it was: the detail pane's.
func (m *Model) ago(at time.Time) string {
	return at.Local().Format(time.DateTime) + " (" + present.Age(m.now.Sub(at)) + " ago)"
}
