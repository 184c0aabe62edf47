package ui

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/textinput"
	tea "charm.land/bubbletea/v2"

	"github.com/taskdeck/taskdeck/deck"
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

// deadlineAsk is the one-line prompt of D (issue 27): by when the task
// must be answered, read as `taskdeck deadline` reads it.
type deadlineAsk struct {
	id    string
	input textinput.Model
}

// deadlineSetMsg is the outcome of a deadline set from the prompt.
type deadlineSetMsg struct {
	task *model.Task
	at   time.Time // zero: removed
	err  error
}

// askDeadline is D: on a task waiting for input it opens the prompt; a
// deck that cannot set deadlines, or a task that waits for no answer,
// is refused in the status line.
func (m *Model) askDeadline() tea.Cmd {
	t := m.selected()
	if t == nil {
		return nil
	}
	if !t.WaitsForInput() {
		return m.fail(fmt.Errorf("task %s is %s: it waits for no answer, and a deadline bounds a wait for input", m.list.shortID(t.ID), t.Status))
	}
	if _, ok := m.deck.(deck.Deadliner); !ok {
		return m.fail(errors.New("this taskdeck cannot set deadlines; restart its owner with this version"))
	}
	in := textinput.New()
	in.Prompt = "deadline of " + m.list.shortID(t.ID) + ": "
	in.Placeholder = "90m, 2h, 2026-12-02 17:00, or none"
	in.SetWidth(36)
	m.deadline = &deadlineAsk{id: t.ID, input: in}
	return m.deadline.input.Focus()
}

// keyDeadline routes a key to the prompt: enter sets the deadline typed
// (one that does not parse is said, and the prompt stays), esc is back.
func (m *Model) keyDeadline(msg tea.KeyPressMsg) tea.Cmd {
	switch {
	case key.Matches(msg, m.keys.PickBack):
		m.deadline = nil
		m.say("no deadline set")
		return nil
	case key.Matches(msg, m.keys.Pick):
		at, err := deck.ParseDeadline(strings.TrimSpace(m.deadline.input.Value()), m.opts.Now())
		if err != nil {
			return m.fail(err)
		}
		dd, id := m.deck.(deck.Deadliner), m.deadline.id
		m.deadline = nil
		ctx := m.ctx
		return func() tea.Msg {
			t, err := dd.SetDeadline(ctx, id, at)
			return deadlineSetMsg{t, at, err}
		}
	}
	var cmd tea.Cmd
	m.deadline.input, cmd = m.deadline.input.Update(msg)
	return cmd
}

// onDeadlineSet says what the deck did with the deadline.
func (m *Model) onDeadlineSet(msg deadlineSetMsg) tea.Cmd {
	switch {
	case msg.err != nil:
		return m.fail(msg.err)
	case msg.at.IsZero():
		m.say("task " + m.list.shortID(msg.task.ID) + ": the deadline you set is removed; a configured one holds")
	default:
		m.say(fmt.Sprintf("task %s must be answered by %s (in %s)", m.list.shortID(msg.task.ID), msg.at.Local().Format(time.DateTime), present.Age(msg.at.Sub(m.opts.Now()))))
	}
	return nil
}
