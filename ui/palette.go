package ui

import (
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/textinput"
	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
)

// palette is the command palette (: or ctrl+p): every action of the
// table with its keys, narrowed by what is typed. Choosing one does what
// its key does, so the palette teaches the keys.
type palette struct {
	query   textinput.Model
	all     []key.Binding
	shown   []key.Binding
	cursor  int
	matched string // the query shown was narrowed by
}

func newPalette(k KeyMap, readOnly bool) (*palette, tea.Cmd) {
	q := textinput.New()
	q.Prompt = ": "
	q.Placeholder = "type to narrow, enter runs"
	q.SetWidth(40)
	p := &palette{query: q}
	// The help's columns run from moving about to acting; the palette
	// lists the actions first.
	cols := k.FullHelp()
	slices.Reverse(cols)
	changes := k.changes()
	for _, col := range cols {
		for _, b := range col {
			isChange := slices.ContainsFunc(changes, func(c change) bool { return c.b.Help().Desc == b.Help().Desc })
			if b.Help().Desc != k.Palette.Help().Desc && !(readOnly && isChange) {
				p.all = append(p.all, b)
			}
		}
	}
	p.narrow()
	return p, p.query.Focus()
}

// narrow shows the actions whose description or keys hold every word of
// the query.
func (p *palette) narrow() {
	p.matched = p.query.Value()
	words := strings.Fields(strings.ToLower(p.matched))
	p.shown = p.shown[:0]
	for _, b := range p.all {
		text := strings.ToLower(b.Help().Desc + " " + b.Help().Key + " " + strings.Join(b.Keys(), " "))
		ok := true
		for _, w := range words {
			ok = ok && strings.Contains(text, w)
		}
		if ok {
			p.shown = append(p.shown, b)
		}
	}
	p.cursor = max(min(p.cursor, len(p.shown)-1), 0)
}

// Update takes one key. With done, run is the key press of the action
// chosen, or nil for back.
func (p *palette) Update(msg tea.KeyPressMsg, k KeyMap) (run *tea.KeyPressMsg, done bool, cmd tea.Cmd) {
	switch {
	case key.Matches(msg, k.PickBack):
		return nil, true, nil
	case key.Matches(msg, k.Pick):
		if len(p.shown) == 0 {
			return nil, false, nil
		}
		press, _ := keyPress(p.shown[p.cursor].Keys()[0]) // the config took only names keyPress reads
		return &press, true, nil
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

// keyPalette routes a key to the palette; the action chosen is done as
// its key would do it in the table.
func (m *Model) keyPalette(msg tea.KeyPressMsg) tea.Cmd {
	run, done, cmd := m.palette.Update(msg, m.keys)
	if !done {
		return cmd
	}
	m.palette = nil
	if run == nil {
		return nil
	}
	return m.keyTable(*run)
}

// View is the palette in a box: the query, then the actions shown, each
// with its keys.
func (p *palette) View(s Styles, width, rows int) string {
	var b strings.Builder
	b.WriteString(s.Title.Render("Commands") + "\n" + p.query.View() + "\n\n")
	inner := width - 4
	start := max(0, min(p.cursor-rows/2, len(p.shown)-rows))
	for i := start; i < min(start+rows, len(p.shown)); i++ {
		h := p.shown[i].Help()
		line := fit(h.Desc, 22) + " " + s.Key.Render(strings.Join(p.shown[i].Keys(), " "))
		if i == p.cursor {
			line = s.Selected.Render("> " + fit(h.Desc, 22) + " " + strings.Join(p.shown[i].Keys(), " "))
		} else {
			line = "  " + line
		}
		b.WriteString(ansi.Truncate(line, inner, "…") + "\n")
	}
	if len(p.shown) == 0 {
		b.WriteString(s.Dim.Render("  no command matches") + "\n")
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
// of the configuration means, and what a palette entry presses. ok is
// false for a name that is no key.
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
