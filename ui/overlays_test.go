package ui

import (
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"
	"github.com/taskdeck/taskdeck/deck"
)

// A question's outcome is typed: No unless another answer is chosen, y
// only where yes is the lone other answer, and the ids it acts on.
func TestQuestionRepliesAreTyped(t *testing.T) {
	k := DefaultKeyMap()
	one := func() *question {
		return &question{text: "Cancel?", ids: []string{"a", "b"}, choices: []choice{{"Yes, cancel", actCancel}}}
	}
	two := func() *question {
		return &question{text: "Refuse?", choices: []choice{{"Decline", actDecline}, {"Cancel the request", actCancelInput}}}
	}
	cases := []struct {
		name string
		q    *question
		keys []string
		want reply
		done bool
	}{
		{"enter on a fresh question is No", one(), []string{"enter"}, reply{}, true},
		{"esc is No", one(), []string{"esc"}, reply{}, true},
		{"n is No", one(), []string{"n"}, reply{}, true},
		{"y is the lone yes, with its ids", one(), []string{"y"}, reply{act: actCancel, ids: []string{"a", "b"}}, true},
		{"y picks nothing among two answers", two(), []string{"y"}, reply{}, false},
		{"right then enter takes the first answer", two(), []string{"right", "enter"}, reply{act: actDecline}, true},
		{"tab twice takes the second", two(), []string{"tab", "tab", "enter"}, reply{act: actCancelInput}, true},
		{"left from No wraps to the last", two(), []string{"left", "enter"}, reply{act: actCancelInput}, true},
		{"right past the last wraps to No", one(), []string{"right", "right", "enter"}, reply{}, true},
	}
	for _, c := range cases {
		var got reply
		done := false
		for _, key := range c.keys {
			if got, done = c.q.Update(keyMsg(key), k); done {
				break
			}
		}
		if done != c.done || got.act != c.want.act || strings.Join(got.ids, ",") != strings.Join(c.want.ids, ",") {
			t.Errorf("%s: got %+v done=%v, want %+v done=%v", c.name, got, done, c.want, c.done)
		}
	}
}

// A picker's outcome carries the value an item stands for (the server's
// own tool name), not the text shown; esc is back; the cursor stays on
// the items.
func TestPickerChoosesValuesNotLabels(t *testing.T) {
	k := DefaultKeyMap()
	p := &picker[string]{items: []string{"shown-a", "shown-b"}, values: []string{"value-a", "value-b"}}
	for _, key := range []string{"up", "down", "down", "down"} {
		if _, done := p.Update(keyMsg(key), k); done {
			t.Fatalf("%s ended the picker", key)
		}
	}
	if out, done := p.Update(keyMsg("enter"), k); !done || out.back || out.value != "value-b" {
		t.Fatalf("enter on the last item: %+v done=%v, want value-b", out, done)
	}
	if out, done := p.Update(keyMsg("esc"), k); !done || !out.back {
		t.Fatalf("esc: %+v done=%v, want back", out, done)
	}
}

// esc is always back: from every overlay to what it was opened over,
// with nothing sent.
func TestEscIsAlwaysBack(t *testing.T) {
	tasks := sampleTasks()
	deploy := tasks[1] // waits for input
	m := loadedWith(t, tasks, 120, 30, `{"mcpServers":{"demo":{"url":"http://127.0.0.1:1/mcp"}}}`, Options{})
	m.cursor = m.list.IndexOf(deploy.ID)
	ctrlX := tea.KeyPressMsg{Code: 'x', Mod: tea.ModCtrl}
	steps := []struct {
		name string
		open func()
		in   mode // what the opening shows
		back mode // what esc goes back to
	}{
		{"detail", func() { press(m, "enter") }, modeDetail, modeTable},
		{"help", func() { press(m, "?") }, modeHelp, modeTable},
		{"filter", func() { press(m, "/") }, modeFilter, modeTable},
		{"question", func() { press(m, "c") }, modeConfirm, modeTable},
		{"server picker", func() { press(m, "n") }, modePick, modeTable},
		{"tool picker", func() {
			m.listing = &listing{server: "demo", gen: 1, cancel: func() {}}
			m.Update(toolsMsg{server: "demo", gen: 1, tools: []deck.Tool{{Name: "sleep"}}})
		}, modePick, modeTable},
		{"answer form", func() { press(m, "a") }, modeForm, modeTable},
		{"question over the form", func() { press(m, "a"); m.Update(ctrlX) }, modeConfirm, modeForm},
	}
	for _, s := range steps {
		s.open()
		if got := m.mode(); got != s.in {
			t.Fatalf("%s: mode %d after opening, want %d:\n%s", s.name, got, s.in, screenOf(m))
		}
		if cmd := press(m, "esc"); cmd != nil {
			t.Fatalf("%s: esc returned a command: something may be sent", s.name)
		}
		if got := m.mode(); got != s.back {
			t.Fatalf("%s: esc went to mode %d, want %d:\n%s", s.name, got, s.back, screenOf(m))
		}
		if s.back != modeTable { // leave the form too
			press(m, "esc")
		}
		if m.mode() != modeTable || !strings.Contains(screenOf(m), "STATUS") {
			t.Fatalf("%s: not back on the table:\n%s", s.name, screenOf(m))
		}
	}
	if got, _ := m.list.Get(deploy.ID); len(got.PendingInputs()) != 1 {
		t.Fatal("the input was answered on the way")
	}
}
