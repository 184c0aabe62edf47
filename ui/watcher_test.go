package ui

import (
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
	"github.com/taskdeck/taskdeck/deck"
)

// On a shared store the engine's entries name who watches each task: the
// detail pane says "watched by host, pid N" (a name from another host,
// made inert), and for a task no engine can reach says so in the detail
// and "none" in the list's NEXT column, at 80 columns too.
func TestDetailAndListNameTheWatcher(t *testing.T) {
	tasks := sampleTasks()
	watched, far := tasks[0], tasks[len(tasks)-1] // both working, with task ids
	m := loaded(t, tasks, 80, 24)
	h := &harness{t: t, m: m, msgs: make(chan tea.Msg, 16)}
	m.Update(feedMsg{events: []deck.Event{{Kind: deck.EventPoll, Entries: []deck.Entry{
		{Task: watched, Poll: deck.PollState{Watcher: "build-7\x1b[31m/4242/9f3a01bc"}},
		{Task: far, Poll: deck.PollState{NoEngine: true}},
	}}}})
	for _, l := range strings.Split(h.screen(), "\n") {
		if strings.Contains(l, m.list.shortID(far.ID)) && !strings.Contains(l, " none ") {
			t.Errorf("the list's row of a task no engine can reach does not say none:\n%s", l)
		}
	}
	raw := m.detailText(watched)
	if strings.Contains(raw, "\x1b[31m") || !strings.Contains(ansi.Strip(raw), "watched by build-7, pid 4242") {
		t.Errorf("the detail pane does not name the watcher, inert:\n%q", raw)
	}
	if detail := ansi.Strip(m.detailText(far)); !strings.Contains(detail, "not polled: no engine can reach its server") {
		t.Errorf("the detail pane of a task no engine can reach:\n%s", detail)
	}
}
