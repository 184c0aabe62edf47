package ui

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/taskdeck/taskdeck/deck"
)

// D on a task waiting for input (issue 27), from its detail pane, opens a
// one-line prompt: esc is back with nothing set, a deadline that does not
// parse is said and the prompt stays, and 90m sets the deadline through
// the engine as this user's act: the pane's countdown says who set it.
func TestSetDeadlineFromTheDashboard(t *testing.T) {
	h, approve := waitingHarness(t)
	h.key("enter", "D")
	if h.m.mode() != modeDeadline || !strings.Contains(h.screen(), "deadline of "+h.m.list.shortID(approve.ID)+":") {
		t.Fatalf("D on the waiting task opened no prompt; screen:\n%s", h.screen())
	}
	h.key("esc")
	if h.m.mode() != modeDetail || h.m.polls[approve.ID].AnswerBy != nil {
		t.Fatalf("esc: mode %d, answer by %+v; want the detail pane back, nothing set", h.m.mode(), h.m.polls[approve.ID].AnswerBy)
	}

	h.key("D", "s", "o", "o", "n", "enter")
	if h.m.mode() != modeDeadline || !strings.Contains(h.m.flash, `deadline "soon": want a duration such as 2h`) {
		t.Fatalf("soon: mode %d, status %q; want it refused, the prompt open", h.m.mode(), h.m.flash)
	}
	h.m.deadline.input.SetValue("")
	h.key("9", "0", "m", "enter")
	h.until("the deadline set, by this user", func(m *Model) bool {
		d := m.polls[approve.ID].AnswerBy
		return d != nil && d.By.Name == deck.LocalUser().Name
	})
	if s := h.screen(); !strings.Contains(s, "answer by") || !strings.Contains(s, "set by "+deck.LocalUser().Name) || !strings.Contains(h.m.flash, "must be answered by") {
		t.Fatalf("the detail pane shows no countdown set by %s (status %q); screen:\n%s", deck.LocalUser().Name, h.m.flash, s)
	}
}

// D is refused in the status line on a task that waits for no answer,
// and on a deck that cannot set deadlines; no prompt opens.
func TestSetDeadlineRefused(t *testing.T) {
	tasks := sampleTasks()
	m := loaded(t, tasks, 120, 30) // decktest: no deck.Deadliner
	for _, tc := range []struct{ id, want string }{
		{tasks[0].ID, "is working: it waits for no answer, and a deadline bounds a wait for input"},
		{tasks[1].ID, "this taskdeck cannot set deadlines; restart its owner with this version"},
	} {
		m.cursor = m.list.IndexOf(tc.id)
		press(m, "D")
		if m.mode() != modeTable || !m.flashErr || !strings.Contains(m.flash, tc.want) {
			t.Errorf("D on %s: mode %d, status %q; want refused with %q", tc.id, m.mode(), m.flash, tc.want)
		}
	}
}

// A task answered elsewhere while the prompt is open: enter says the
// deck's one-line refusal, and nothing is set.
func TestSetDeadlineOnATaskAnsweredMeanwhile(t *testing.T) {
	h, approve := waitingHarness(t)
	h.key("D", "2", "h")
	if _, err := h.eng.Answer(context.Background(), approve.ID, map[string]json.RawMessage{"approve-1": json.RawMessage(`{"action":"accept","content":{"approve":true,"reason":"ok"}}`)}); err != nil {
		t.Fatal(err)
	}
	h.key("enter")
	h.until("the deck's refusal", func(m *Model) bool { return m.flashErr })
	if !strings.Contains(h.m.flash, "waits for no answer, and a deadline bounds a wait for input") || strings.Contains(h.m.flash, "\n") {
		t.Fatalf("status line %q; want the deck's one line", h.m.flash)
	}
	for _, e := range h.records() {
		if e.Task.WaitDeadline != nil {
			t.Fatalf("a deadline was set on %s: %+v", e.Task.ID, e.Task.WaitDeadline)
		}
	}
}
