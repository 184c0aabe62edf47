package ui

import (
	"context"
	"fmt"

	tea "charm.land/bubbletea/v2"
	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/present"
)

// Found tasks: tasks a 2025-11-25 server lists that no record held. `a`
// on one asks whether to adopt it (watch it) or leave it to its server;
// `r` also reconciles with the servers' task lists, which finds them.

// reconciledMsg is the outcome of a reconcile `r` started.
type reconciledMsg struct {
	res deck.Reconciled
	err error
}

func reconcile(ctx context.Context, d deck.Deck) tea.Cmd {
	return func() tea.Msg {
		res, err := d.Reconcile(ctx)
		return reconciledMsg{res, err}
	}
}

// onReconciled says what a reconcile found; a quiet one says nothing.
func (m *Model) onReconciled(msg reconciledMsg) tea.Cmd {
	if msg.err != nil {
		return m.fail(msg.err)
	}
	if n := len(msg.res.Found); n > 0 {
		m.say(fmt.Sprintf("found %s the servers list and no record held: a adopts or leaves", present.Count(n, "task")))
	}
	return nil
}

// answerSelected is `a`: on a found task it asks whether to adopt or
// leave it, else it opens the selected task's input request.
func (m *Model) answerSelected() tea.Cmd {
	switch t := m.selected(); {
	case t == nil:
		return nil
	case t.Status == model.StatusFound:
		return m.askFound()
	default:
		return m.openAnswer(t)
	}
}

// askFound asks what to do with the found targets.
func (m *Model) askFound() tea.Cmd {
	var found []*model.Task
	for _, t := range m.targets() {
		if t.Status == model.StatusFound {
			found = append(found, t)
		}
	}
	if len(found) == 0 {
		return nil
	}
	m.ask(fmt.Sprintf("Adopt %s (taskdeck watches it and fetches its result), or leave it to its server (not offered again)?",
		present.Count(len(found), "found task")), found, choice{"Adopt", actAdopt})
	m.question.choices = append(m.question.choices, choice{"Leave", actLeave})
	return nil
}

// settleFound adopts or leaves each found task through the Deck.
func (m *Model) settleFound(ids []string, adopt bool) tea.Cmd {
	verb, done := "leaving", "left"
	if adopt {
		verb, done = "adopting", "adopted"
	}
	d := m.deck
	return m.startBulk(verb, done, ids, 1, oneByOne(func(ctx context.Context, id string) error {
		_, err := d.SettleFound(ctx, id, adopt)
		return err
	}), nil)
}
