package ui

import (
	"strings"
	"testing"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
)

// Every action of the table is in the palette, with what it runs (the
// groups are its places); every key of the table's bindings is a name
// the config reads back as that key.
func TestEveryTableActionIsInThePalette(t *testing.T) {
	k := DefaultKeyMap()
	p, _ := newPalette(k, false, nil)
	var table int
	for _, col := range k.FullHelp() {
		table += len(col)
		for _, b := range col {
			for _, name := range b.Keys() {
				press, ok := keyPress(name)
				if !ok || !key.Matches(press, b) || press.String() != name {
					t.Errorf("%s: key %q makes a press %q that does not match it", b.Help().Desc, name, press.String())
				}
			}
		}
	}
	if len(p.all) != table-2 { // all but the palette itself and the groups
		t.Fatalf("the palette has %d actions, the table %d", len(p.all), table)
	}
	for _, a := range p.all {
		if a.do == nil {
			t.Errorf("the palette's %q runs nothing", a.b.Help().Desc)
		}
	}
}

// An action chosen in the palette runs itself, whatever its keys: one
// rebound to a key only (here "ctrl+a" taken off mark all, "M" given)
// still runs.
func TestPaletteRunsTheActionNotAKey(t *testing.T) {
	m := loaded(t, sampleTasks(), 80, 24)
	m.keys.MarkAll = key.NewBinding(key.WithKeys("M"), key.WithHelp("M", "mark all"))
	press(m, ":")
	for _, r := range "mark all" {
		press(m, string(r))
	}
	press(m, "enter")
	if m.mode() != modeTable || len(m.marked) != m.list.Len() {
		t.Fatalf("after enter: mode %d, %d of %d marked", m.mode(), len(m.marked), m.list.Len())
	}
}

// : opens the palette, typing narrows it, enter does the action; ctrl+p
// opens it too, and esc leaves it having done nothing.
func TestPaletteNarrowsAndRuns(t *testing.T) {
	m := loaded(t, sampleTasks(), 80, 24)
	press(m, ":")
	if m.mode() != modePalette {
		t.Fatalf("mode %d after :", m.mode())
	}
	s := screenOf(m)
	for _, want := range []string{"Go to, or do", "inbox", "servers", "group finished", "re-run", "cancel"} {
		if !strings.Contains(s, want) {
			t.Fatalf("the palette lacks %q:\n%s", want, s)
		}
	}
	for _, r := range "mark all" {
		press(m, string(r))
	}
	if len(m.palette.shown) != 2 || m.palette.shown[0].desc != "mark all" { // and "unmark all"
		t.Fatalf("\"mark all\" narrows to %d actions", len(m.palette.shown))
	}
	if !strings.Contains(screenOf(m), "ctrl+a") {
		t.Fatalf("the palette does not show the action's key:\n%s", screenOf(m))
	}
	press(m, "enter")
	if m.mode() != modeTable || len(m.marked) != m.list.Len() {
		t.Fatalf("after enter: mode %d, %d of %d marked", m.mode(), len(m.marked), m.list.Len())
	}

	m.Update(tea.KeyPressMsg{Code: 'p', Mod: tea.ModCtrl})
	if m.mode() != modePalette {
		t.Fatal("ctrl+p does not open the palette")
	}
	press(m, "c") // typed, not the cancel key
	if m.question != nil {
		t.Fatal("a letter typed in the palette acted")
	}
	press(m, "esc")
	if m.mode() != modeTable || m.question != nil {
		t.Fatalf("esc: mode %d", m.mode())
	}
}

// ctrl+z suspends the program (Bubble Tea restores the terminal and
// stops the process; fg brings it back).
func TestCtrlZSuspends(t *testing.T) {
	m := loaded(t, sampleTasks(), 80, 24)
	_, cmd := m.Update(tea.KeyPressMsg{Code: 'z', Mod: tea.ModCtrl})
	if cmd == nil {
		t.Fatal("ctrl+z did nothing")
	}
	if _, ok := cmd().(tea.SuspendMsg); !ok {
		t.Fatal("ctrl+z does not suspend")
	}
}

// The palette, a bulk question and a re-run's question fit 80×24 and
// 200×60, footer included.
func TestNewViewsFitTheScreen(t *testing.T) {
	for _, size := range [][2]int{{80, 24}, {200, 60}} {
		w, h := size[0], size[1]
		m := loaded(t, sampleTasks(), w, h)
		for name, open := range map[string]func(){
			"palette":  func() { press(m, ":") },
			"bulk":     func() { m.Update(ctrlA); press(m, "d") },
			"re-run":   func() { m.Update(ctrlA); press(m, "R") },
			"progress": func() { m.bulk = &bulkJob{verb: "cancelling", total: 2000}; m.bulk.finished.Store(340) },
		} {
			open()
			lines := strings.Split(m.View().Content, "\n")
			if len(lines) != h {
				t.Fatalf("%s at %dx%d: %d lines", name, w, h, len(lines))
			}
			for _, l := range lines {
				if lw := ansi.StringWidth(l); lw > w {
					t.Fatalf("%s at %dx%d: a line of %d cells: %q", name, w, h, lw, ansi.Strip(l))
				}
			}
			if s := screenOf(m); !strings.Contains(lines[len(lines)-1], "•") {
				t.Fatalf("%s at %dx%d: the footer is gone:\n%s", name, w, h, s)
			}
			if name == "progress" && !strings.Contains(screenOf(m), "cancelling 340/2000 …") {
				t.Fatalf("no progress line at %dx%d:\n%s", w, h, screenOf(m))
			}
			m.palette, m.question, m.bulk = nil, nil, nil
			clear(m.marked)
		}
	}
}

// The palette goes places: :inbox, :servers, :group finished, :agent X
// (one known and one no task names yet), :server X; esc comes back to
// every task.
func TestPaletteNavigates(t *testing.T) {
	tasks := serverTasks()
	tasks[0].Agent, tasks[1].Agent = "ux-agent", "ux-agent"
	tasks[2].Agent = "other"
	m := loaded(t, tasks, 80, 24)
	run := func(query string) {
		t.Helper()
		press(m, ":")
		for _, r := range query {
			press(m, string(r))
		}
		press(m, "enter")
		if m.palette != nil {
			t.Fatalf(":%s left the palette open", query)
		}
	}
	run("inbox")
	if g := m.list.group; g == nil || !g.Waiting || len(m.list.visible) != 2 {
		t.Fatalf(":inbox shows group %v, %d rows", g, len(m.list.visible))
	}
	run("servers")
	if m.mode() != modeServers {
		t.Fatalf(":servers leaves mode %v", m.mode())
	}
	press(m, "esc")
	run("group finished")
	if g := m.list.group; g == nil || g.Name != "finished" || !strings.Contains(screenOf(m), "[3 finished 6]") {
		t.Fatalf(":group finished shows %v:\n%s", g, screenOf(m))
	}
	press(m, "0")
	run("agent ux-agent")
	if ids := visibleIDs(m); len(ids) != 2 || ids[0] != "t01" || !strings.Contains(screenOf(m), "agent: ux-agent") {
		t.Fatalf(":agent ux-agent shows %v:\n%s", ids, screenOf(m))
	}
	press(m, "esc")
	if len(m.list.visible) != len(tasks) {
		t.Fatalf("esc after :agent shows %d of %d", len(m.list.visible), len(tasks))
	}
	run("agent nobody")
	if len(m.list.visible) != 0 || !strings.Contains(screenOf(m), "agent: nobody") {
		t.Fatalf(":agent nobody shows %d rows:\n%s", len(m.list.visible), screenOf(m))
	}
	press(m, "esc")
	run("server web")
	if ids := visibleIDs(m); len(ids) != 1 || ids[0] != "t90" {
		t.Fatalf(":server web shows %v", ids)
	}
}
