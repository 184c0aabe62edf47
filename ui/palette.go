package ui

import (
	"maps"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/textinput"
	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
	"github.com/taskdeck/taskdeck/deck"
)

// palette is the command palette (: or ctrl+p): the places to go (the
// inbox, the servers, a group, an agent's or a server's tasks), then
// every action of the table with its keys, narrowed by what is typed.
// Choosing an action runs what its key runs, so the palette teaches the
// keys.
type palette struct {
	query   textinput.Model
	places  []paletteItem
	all     []action
	shown   []paletteItem
	cursor  int
	matched string // the query shown was narrowed by
}

// paletteItem is one line of the palette: a place (to) or an action (do).
type paletteItem struct {
	desc, keys string
	to         func(m *Model)
	do         func(m *Model) tea.Cmd
}

// place is where the palette can go, as the query names it (`inbox`,
// `agent bob`), with the key that goes there too, if any.
type place struct {
	name, keys string
	to         func(m *Model)
}

func newPalette(k KeyMap, readOnly bool, places []place) (*palette, tea.Cmd) {
	q := textinput.New()
	q.Prompt = ": "
	q.Placeholder = "inbox, servers, agent X, group finished, an action…"
	q.SetWidth(60)
	p := &palette{query: q}
	for _, pl := range places {
		p.places = append(p.places, paletteItem{desc: pl.name, keys: pl.keys, to: pl.to})
	}
	// The help's columns run from moving about to acting; the palette
	// lists the actions first. The groups are places.
	cols := k.tableActions()
	slices.Reverse(cols)
	changes := k.changes()
	for _, col := range cols {
		for _, a := range col {
			isChange := slices.ContainsFunc(changes, func(c change) bool { return c.b.Help().Desc == a.b.Help().Desc })
			if a.do != nil && a.b.Help().Desc != k.Palette.Help().Desc && !(readOnly && isChange) {
				p.all = append(p.all, a)
			}
		}
	}
	p.narrow()
	return p, p.query.Focus()
}

// openPalette opens the palette over the table.
func (m *Model) openPalette() tea.Cmd {
	var cmd tea.Cmd
	m.palette, cmd = newPalette(m.keys, m.opts.ReadOnly, m.places())
	m.detail = nil
	return cmd
}

// places are where the palette goes: the inbox, the servers view, each
// group, each agent's and each server's tasks.
func (m *Model) places() []place {
	k := m.keys
	out := []place{
		{"inbox", keyOf(k.Groups, 1), func(m *Model) { m.showGroup(waitingGroup()) }},
		{"servers", keyOf(k.ServersView, 0), func(m *Model) { m.openServers(m.list.server) }},
		{"group all", keyOf(k.AllGroups, 0), func(m *Model) { m.showGroup(nil) }},
	}
	for i, g := range deck.Groups {
		out = append(out, place{"group " + g.Name, keyOf(k.Groups, i), func(m *Model) { m.showGroup(&deck.Groups[i]) }})
	}
	for _, a := range slices.Sorted(maps.Keys(m.list.agents)) {
		if m.list.agents[a] > 0 {
			out = append(out, place{"agent " + a, "", func(m *Model) { m.showAgent(a) }})
		}
	}
	for _, s := range m.serverNames() {
		out = append(out, place{"server " + s, "", func(m *Model) { m.showServer(s) }})
	}
	return out
}

// keyOf is a binding's i-th key, "" past its last.
func keyOf(b key.Binding, i int) string {
	if i < len(b.Keys()) {
		return b.Keys()[i]
	}
	return ""
}

func waitingGroup() *deck.Group {
	i := slices.IndexFunc(deck.Groups, func(g deck.Group) bool { return g.Waiting })
	return &deck.Groups[i]
}

// narrow shows the places and actions whose name or keys hold every word
// of the query; `agent X` for an agent no task names yet goes there too.
func (p *palette) narrow() {
	p.matched = p.query.Value()
	words := strings.Fields(strings.ToLower(p.matched))
	holds := func(text string) bool {
		text = strings.ToLower(text)
		for _, w := range words {
			if !strings.Contains(text, w) {
				return false
			}
		}
		return true
	}
	p.shown = p.shown[:0]
	for _, pl := range p.places {
		if holds(pl.desc + " " + pl.keys) {
			p.shown = append(p.shown, pl)
		}
	}
	if f := strings.Fields(p.matched); len(f) == 2 && f[0] == "agent" && !slices.ContainsFunc(p.shown, func(it paletteItem) bool { return it.desc == "agent "+f[1] }) {
		name := f[1]
		p.shown = append(p.shown, paletteItem{desc: "agent " + name, to: func(m *Model) { m.showAgent(name) }})
	}
	for _, a := range p.all {
		h := a.b.Help()
		if holds(h.Desc + " " + h.Key + " " + strings.Join(a.b.Keys(), " ")) {
			p.shown = append(p.shown, paletteItem{desc: h.Desc, keys: strings.Join(a.b.Keys(), " "), do: a.do})
		}
	}
	p.cursor = max(min(p.cursor, len(p.shown)-1), 0)
}

// Update takes one key. With done, chosen is the item chosen, or nil
// for back.
func (p *palette) Update(msg tea.KeyPressMsg, k KeyMap) (chosen *paletteItem, done bool, cmd tea.Cmd) {
	switch {
	case key.Matches(msg, k.PickBack):
		return nil, true, nil
	case key.Matches(msg, k.Pick):
		if len(p.shown) == 0 {
			return nil, false, nil
		}
		return &p.shown[p.cursor], true, nil
	case key.Matches(msg, k.Move):
		if msg.Code == tea.KeyUp {
			p.cursor = max(p.cursor-1, 0)
		} else {
			p.cursor = min(p.cursor+1, max(len(p.shown)-1, 0))
		}
		return nil, false, nil
	}
	p.query, cmd = p.query.Update(msg)
	if p.query.Value() != p.matched {
		p.narrow()
	}
	return nil, false, cmd
}

// keyPalette routes a key to the palette; a place chosen is gone to, an
// action run as its key runs it in the table.
func (m *Model) keyPalette(msg tea.KeyPressMsg) tea.Cmd {
	chosen, done, cmd := m.palette.Update(msg, m.keys)
	if !done {
		return cmd
	}
	m.palette = nil
	switch {
	case chosen == nil:
		return nil
	case chosen.to != nil:
		chosen.to(m)
		return nil
	}
	return chosen.do(m)
}

// showAgent shows one agent's tasks alone; esc shows every task again.
func (m *Model) showAgent(name string) {
	selected := m.selectedID()
	m.list.agent = name
	m.list.refilter()
	m.keepSelected(selected)
	m.say("showing agent " + name + "'s tasks (esc: every task)")
}

// showServer shows one server's tasks alone, as v does.
func (m *Model) showServer(name string) {
	selected := m.selectedID()
	m.list.server = name
	m.list.refilter()
	m.keepSelected(selected)
	m.say("showing server " + name + " (esc: every task)")
}

// View is the palette in a box: the query, then the places and actions
// shown, each with its keys.
func (p *palette) View(s Styles, width, rows int) string {
	var b strings.Builder
	b.WriteString(s.Title.Render("Go to, or do") + "\n" + p.query.View() + "\n\n")
	inner := width - 4
	start := max(0, min(p.cursor-rows/2, len(p.shown)-rows))
	for i := start; i < min(start+rows, len(p.shown)); i++ {
		it := p.shown[i]
		var line string
		if i == p.cursor {
			line = s.Selected.Render("> " + fit(it.desc, 28) + " " + it.keys)
		} else {
			line = "  " + fit(it.desc, 28) + " " + s.Key.Render(it.keys)
		}
		b.WriteString(ansi.Truncate(line, inner, "…") + "\n")
	}
	if len(p.shown) == 0 {
		b.WriteString(s.Dim.Render("  nothing matches") + "\n")
	}
	b.WriteString("\nenter runs · esc back · the keys on the right do the same from the table")
	return s.Box.Width(width).Render(b.String())
}

// namedKeys are the key names bindings use that are not one character.
var namedKeys = map[string]rune{
	"enter": tea.KeyEnter, "esc": tea.KeyEscape, "space": tea.KeySpace, "tab": tea.KeyTab,
	"up": tea.KeyUp, "down": tea.KeyDown, "left": tea.KeyLeft, "right": tea.KeyRight,
	"pgup": tea.KeyPgUp, "pgdown": tea.KeyPgDown, "home": tea.KeyHome, "end": tea.KeyEnd,
	"backspace": tea.KeyBackspace, "delete": tea.KeyDelete,
}

// keyPress is the key press a binding's key name stands for: what a key
// of the configuration means. ok is false for a name that is no key.
func keyPress(name string) (press tea.KeyPressMsg, ok bool) {
	var mod tea.KeyMod
	for {
		switch {
		case strings.HasPrefix(name, "ctrl+") && len(name) > len("ctrl+"):
			mod |= tea.ModCtrl
			name = name[len("ctrl+"):]
			continue
		case strings.HasPrefix(name, "alt+") && len(name) > len("alt+"):
			mod |= tea.ModAlt
			name = name[len("alt+"):]
			continue
		case strings.HasPrefix(name, "shift+") && len(name) > len("shift+"):
			mod |= tea.ModShift
			name = name[len("shift+"):]
			continue
		}
		break
	}
	if code, ok := namedKeys[name]; ok {
		if code == tea.KeySpace && mod == 0 {
			return tea.KeyPressMsg{Code: code, Text: " "}, true
		}
		return tea.KeyPressMsg{Code: code, Mod: mod}, true
	}
	r, size := utf8.DecodeRuneInString(name)
	if size == 0 || size != len(name) || !unicode.IsPrint(r) {
		return tea.KeyPressMsg{}, false
	}
	if mod != 0 {
		return tea.KeyPressMsg{Code: r, Mod: mod}, true
	}
	return tea.KeyPressMsg{Code: r, Text: name}, true
}
