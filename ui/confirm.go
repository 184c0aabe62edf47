package ui

import (
	"fmt"
	"strings"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
)

// act is what a question's answer does besides No.
type act int

const (
	actCancel      act = iota + 1 // tasks/cancel the ids
	actForget                     // forget the ids
	actPrune                      // prune finished tasks
	actQuit                       // quit although stdio tasks die
	actDecline                    // decline the open form's input request
	actCancelInput                // cancel the open form's input request
	actRerun                      // call the ids' tools again with their arguments
	actAdopt                      // adopt the found ids (watch them)
	actLeave                      // leave the found ids to their servers
)

// choice is one answer to a question besides No.
type choice struct {
	label string
	act   act
}

// question is a question over the screen. Its first answer, No, is the
// default; the others act on ids.
type question struct {
	text    string
	targets []string // the first maxTargets of what it acts on, one line each
	ids     []string // all it acts on
	choices []choice
	cursor  int // 0 is No, i is choices[i-1]
}

// reply is a question's outcome: the act chosen (0 for No) and the ids
// it acts on.
type reply struct {
	act act
	ids []string
}

// Update takes one key. done tells that the question is answered.
func (q *question) Update(msg tea.KeyPressMsg, k KeyMap) (a reply, done bool) {
	switch {
	case key.Matches(msg, k.Choose):
		d := 1
		if s := msg.String(); s == "left" || s == "h" || s == "shift+tab" {
			d = -1
		}
		q.cursor = (q.cursor + d + len(q.choices) + 1) % (len(q.choices) + 1)
	case key.Matches(msg, k.Pick):
		return q.reply(q.cursor), true
	case key.Matches(msg, k.Confirm) && len(q.choices) == 1:
		return q.reply(1), true
	case key.Matches(msg, k.Deny):
		return q.reply(0), true
	}
	return reply{}, false
}

// reply is the i-th answer (0 is No).
func (q *question) reply(i int) reply {
	if i == 0 {
		return reply{}
	}
	return reply{act: q.choices[i-1].act, ids: q.ids}
}

// maxTargets bounds the tasks a question lists by name.
const maxTargets = 8

// View is the question in a box: what it acts on, and its answers, the
// chosen one in reverse and in brackets (which read without colour too).
// No is first, and chosen until another is.
func (q *question) View(s Styles, width int) string {
	var b strings.Builder
	b.WriteString(s.Title.Render(q.text) + "\n")
	for _, t := range q.targets {
		b.WriteString("  " + t + "\n")
	}
	if more := len(q.ids) - len(q.targets); more > 0 {
		b.WriteString(fmt.Sprintf("  … and %d more\n", more))
	}
	b.WriteString("\n")
	labels := []string{"No"}
	for _, c := range q.choices {
		labels = append(labels, c.label)
	}
	for i, label := range labels {
		if i == q.cursor {
			b.WriteString(s.Selected.Render("[ "+label+" ]") + "  ")
		} else {
			b.WriteString("  " + label + "    ")
		}
	}
	return s.Box.Width(width).Render(strings.TrimRight(b.String(), " "))
}
