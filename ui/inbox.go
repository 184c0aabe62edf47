package ui

import (
	"cmp"
	"fmt"
	"strings"
	"time"

	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/present"
	"github.com/taskdeck/taskdeck/termtext"
)

// The inbox is the "waiting for me" group (key 2): every task, on every
// server, with a question the operator has not answered, who waited
// longest first, with how long each has waited for a person. Nothing
// times out on the operator's side: the form waits as long as they do.

// inboxOrder puts who waited longest first.
func inboxOrder(a, b *row) int {
	return cmp.Or(a.waitingSince.Compare(b.waitingSince), cmp.Compare(a.task.ID, b.task.ID))
}

// inInbox tells that the table shows the inbox, whose AGE column is how
// long each task has waited for an answer.
func (m *Model) inInbox() bool { return m.list.group != nil && m.list.group.Waiting }

// ageCell is a row's AGE cell: its age, or in the inbox how long it has
// waited for an answer.
func (m *Model) ageCell(r *row) string {
	if m.inInbox() && r.waits {
		return m.when(r.waitingSince)
	}
	return m.when(r.task.CreatedAt)
}

// answeredText lists what was answered to a task's input requests and
// when, oldest first (the server's text, sanitized).
func (m *Model) answeredText(t *model.Task) string {
	var b strings.Builder
	for _, a := range t.Answers {
		line := strings.TrimRight(fmt.Sprintf("  %s  %s  %s", m.ago(a.At), termtext.Line(a.Key), termtext.Line(string(a.Response))), " ")
		if a.Refused {
			line += m.styles.Error.Render("  refused by the server: asked again")
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}

// waitedText is the detail pane's line for a task that waits for input.
func (m *Model) waitedText(t *model.Task) string {
	if !t.WaitsForInput() {
		return ""
	}
	since := t.WaitingSince()
	return present.Age(m.now.Sub(since)) + " (since " + since.Local().Format(time.DateTime) + ")"
}

// ageTitle is the AGE column's title: WAITED in the inbox; with t (clock
// times) the column holds when the task started, or began to wait.
func (m *Model) ageTitle(w int) string {
	switch {
	case m.inInbox() && m.absTimes:
		return "SINCE"
	case m.inInbox():
		return ifWide(w, "WAITED", "WAIT")
	case m.absTimes:
		return "START"
	}
	return "AGE"
}
