package ui

import (
	"strings"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
)

// picker is a one-of-many choice (a server, then a tool, for a new call).
// Each item stands for a value of T, which the outcome carries.
type picker[T any] struct {
	title  string
	items  []string // as shown: sanitized
	notes  []string
	values []T
	cursor int
}

// picked is a picker's outcome: the value chosen, or back (esc).
type picked[T any] struct {
	value T
	back  bool
}

// Update takes one key. done tells that the picker is over.
func (p *picker[T]) Update(msg tea.KeyPressMsg, k KeyMap) (out picked[T], done bool) {
	switch {
	case key.Matches(msg, k.Up):
		p.cursor = max(p.cursor-1, 0)
	case key.Matches(msg, k.Down):
		p.cursor = min(p.cursor+1, len(p.items)-1)
	case key.Matches(msg, k.PickBack):
		return picked[T]{back: true}, true
	case key.Matches(msg, k.Pick):
		return picked[T]{value: p.values[p.cursor]}, true
	}
	return out, false
}

// View is the picker in a box of width cells, showing at most rows items
// around the cursor.
func (p *picker[T]) View(s Styles, width, rows int) string {
	var b strings.Builder
	b.WriteString(s.Title.Render(p.title) + "\n\n")
	start := max(0, min(p.cursor-rows/2, len(p.items)-rows))
	inner := width - 4 // the border and padding
	w := 0             // of the widest item, so that the notes stand in a column
	for _, item := range p.items {
		w = max(w, ansi.StringWidth(item))
	}
	for i := start; i < min(start+rows, len(p.items)); i++ {
		name, note := fit(p.items[i], w), ""
		if i < len(p.notes) && p.notes[i] != "" {
			note = "  " + p.notes[i]
		}
		line := "  " + name + s.Dim.Render(note)
		if i == p.cursor {
			line = s.Selected.Render("> "+name) + note
		}
		b.WriteString(ansi.Truncate(line, inner, "…") + "\n")
	}
	b.WriteString("\nenter choose · esc back")
	return s.Box.Width(width).Render(b.String())
}
