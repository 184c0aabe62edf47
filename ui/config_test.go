package ui

import (
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"
	"github.com/taskdeck/taskdeck/deck/decktest"
	"github.com/taskdeck/taskdeck/model"
)

// The config file's dashboard section rebinds keys (the help and the
// palette say the new ones), recolours statuses, and turns the mouse off.
func TestConfigRebindsKeysAndColours(t *testing.T) {
	file := `{"mcpServers":{},"dashboard":{"keys":{"cancel":["x","ctrl+k"]},"colors":{"working":"#112233","dim":"250"},"mouse":false}}`
	cfg, err := ParseConfig([]byte(file))
	if err != nil {
		t.Fatal(err)
	}
	tasks := sampleTasks()
	m := loadedOn(t, decktest.New(nil), tasks, 120, 30, Options{Config: cfg})
	var working *model.Task
	for _, tk := range tasks {
		if tk.Status == model.StatusWorking {
			working = tk
		}
	}
	m.cursor = m.list.IndexOf(working.ID)
	press(m, "c")
	if m.question != nil {
		t.Fatal("c still cancels")
	}
	press(m, "x")
	if m.question == nil || !strings.Contains(screenOf(m), "Cancel 1 task on the server?") {
		t.Fatalf("x does not cancel:\n%s", screenOf(m))
	}
	press(m, "esc")
	m.cursor = m.list.IndexOf(tasks[len(tasks)-1].ID) // not the working row: its colour shows
	if v := m.View(); !strings.Contains(v.Content, "38;2;17;34;51") || v.MouseMode != tea.MouseModeNone {
		t.Fatalf("working is not #112233, or the mouse is on (%v)", v.MouseMode)
	}
	press(m, "?")
	if s := screenOf(m); !strings.Contains(s, "x/ctrl+k cancel") {
		t.Fatalf("the help does not name the new keys:\n%s", s)
	}
}

// A wrong dashboard section is one line that names the entry and says
// what to write; no section is the default.
func TestConfigErrorsSayWhatToWrite(t *testing.T) {
	if c, err := ParseConfig([]byte(`{"mcpServers":{}}`)); err != nil || !c.mouse {
		t.Fatalf("no section: %v", err)
	}
	for _, c := range []struct{ section, want string }{
		{`{"keys":{"explode":["e"]}}`, `dashboard.keys.explode: no such action; the actions are `},
		{`{"keys":{"cancel":["ctrl+"]}}`, `dashboard.keys.cancel: "ctrl+" is not a key name`},
		{`{"keys":{"cancel":[]}}`, `dashboard.keys.cancel: give at least one key`},
		{`{"keys":{"cancel":["d"]}}`, `"d" would mean both "cancel" and "forget" in the table`},
		{`{"colors":{"working":"blue"}}`, `dashboard.colors.working: "blue" is not a colour; use an ANSI number 0-255 or #rrggbb`},
		{`{"colors":{"workin":"33"}}`, `dashboard.colors.workin: nothing has that name`},
		{`{"skin":"dark"}`, `dashboard: json: unknown field "skin"`},
		{`{"mouse":"yes"}`, `dashboard: json: cannot unmarshal`},
	} {
		_, err := ParseConfig([]byte(`{"mcpServers":{},"dashboard":` + c.section + `}`))
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error %v, want one line with %q", c.section, err, c.want)
		}
	}
}
