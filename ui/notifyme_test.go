package ui

import (
	"fmt"
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/termtext"
)

// W on a row asks to be told of its changes: the row shows +, and when
// its status changes the dashboard sends the bell and a desktop
// notification (tmux-wrapped inside tmux); a task that ended asks nothing
// more, and another task's change sends nothing.
func TestNotifyMeOnChange(t *testing.T) {
	tasks := sampleTasks()
	m := loaded(t, tasks, 120, 30)
	m.opts.Desktop = termtext.DesktopNotification(func(k string) string {
		return map[string]string{"TERM": "tmux-256color", "TMUX": "/tmp/tmux-1/default,1,0"}[k]
	})
	h := &harness{t: t, m: m, msgs: make(chan tea.Msg, 16)}
	compile := tasks[0]
	m.cursor = m.list.IndexOf(compile.ID)
	h.key("W")
	if !m.notifyMe[compile.ID] || !strings.Contains(m.flash, "when its status changes") {
		t.Fatalf("after W: notifyMe %v, status line %q", m.notifyMe, m.flash)
	}
	if row := m.viewRow(m.list.visible[m.cursor], m.columns(), false); !strings.HasPrefix(strings.TrimLeft(row, " "), notifyMeMark) {
		t.Errorf("the row does not show %q: %q", notifyMeMark, row)
	}
	// What the frame of a change writes besides the screen.
	change := func(t0 *model.Task, st model.Status) {
		c := t0.Clone()
		c.Status = st
		h.raw = append(h.raw, rawOf(m.onFeed(feedMsg{events: []deck.Event{{Kind: deck.EventChange, Rev: 2, Entries: []deck.Entry{{Task: c}}}}}))...)
	}
	change(tasks[8], model.StatusCompleted) // "evil", not asked for
	if len(h.raw) != 0 {
		t.Fatalf("another task's change sent %q", h.raw)
	}
	change(compile, model.StatusCompleted)
	want := "\a\x1bPtmux;\x1b\x1b]9;taskdeck: compile working → completed\a\x1b\\"
	if strings.Join(h.raw, "|") != want {
		t.Fatalf("sent %q, want %q", strings.Join(h.raw, "|"), want)
	}
	if m.notifyMe[compile.ID] || !strings.Contains(m.told(), "compile (task") {
		t.Errorf("after it completed: notifyMe %v, told %q", m.notifyMe, m.told())
	}
	// The change came within a second of W: W's answer stays on the
	// status line, the change told after it (200 columns hold both).
	m.Update(tea.WindowSizeMsg{Width: 200, Height: 30})
	lines := strings.Split(screenOf(m), "\n")
	status := lines[len(lines)-2]
	if !strings.Contains(status, "the bell and a desktop notification") || !strings.Contains(status, "· compile (task t00) is now completed") {
		t.Errorf("status line %q: want W's answer, then the change", status)
	}
}

// rawOf is what cmd has tea.Raw write.
func rawOf(cmd tea.Cmd) []string {
	if cmd == nil {
		return nil
	}
	switch msg := cmd().(type) {
	case tea.RawMsg:
		return []string{fmt.Sprint(msg.Msg)}
	case tea.BatchMsg:
		var out []string
		for _, c := range msg {
			out = append(out, rawOf(c)...)
		}
		return out
	}
	return nil
}
