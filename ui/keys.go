package ui

import "charm.land/bubbles/v2/key"

// KeyMap is every key of the dashboard, with its help text. Destructive
// actions (cancel, forget, prune) always ask for confirmation.
type KeyMap struct {
	Up, Down, PageUp, PageDown, Top, Bottom key.Binding

	Detail, Filter, StatusFilter, Sort key.Binding
	Answer, NextInput                  key.Binding
	Cancel, Forget, Prune              key.Binding
	PollNow, NewCall, Mark, Copy       key.Binding
	Help, Quit, Back                   key.Binding
	Confirm, Deny                      key.Binding
}

// DefaultKeyMap is the dashboard's key map.
func DefaultKeyMap() KeyMap {
	b := func(help, desc string, keys ...string) key.Binding {
		return key.NewBinding(key.WithKeys(keys...), key.WithHelp(help, desc))
	}
	return KeyMap{
		Up:       b("↑/k", "up", "up", "k"),
		Down:     b("↓/j", "down", "down", "j"),
		PageUp:   b("pgup", "page up", "pgup", "ctrl+u"),
		PageDown: b("pgdn", "page down", "pgdown", "ctrl+d"),
		Top:      b("home/g", "first", "home", "g"),
		Bottom:   b("end/G", "last", "end", "G"),

		Detail:       b("enter", "details", "enter"),
		Filter:       b("/", "filter", "/"),
		StatusFilter: b("s", "status filter", "s"),
		Sort:         b("o", "sort order", "o"),

		Answer:    b("a", "answer input", "a"),
		NextInput: b("i", "next waiting for input", "i"),

		Cancel: b("c", "cancel task(s)", "c"),
		Forget: b("d", "forget task(s)", "d"),
		Prune:  b("p", "prune finished", "p"),

		PollNow: b("r", "poll now", "r"),
		NewCall: b("n", "new call", "n"),
		Mark:    b("space", "mark", "space"),
		Copy:    b("y", "copy result", "y"),

		Help: b("?", "help", "?"),
		Quit: b("q", "quit", "q", "ctrl+c"),
		Back: b("esc", "back", "esc"),

		Confirm: b("y/enter", "yes", "y", "enter"),
		Deny:    b("n/esc", "no", "n", "esc"),
	}
}

// ShortHelp is the footer line.
func (k KeyMap) ShortHelp() []key.Binding {
	return []key.Binding{k.Help, k.Quit, k.Detail, k.NextInput, k.Answer, k.Cancel, k.NewCall, k.Filter}
}

// FullHelp is the help screen, by column.
func (k KeyMap) FullHelp() [][]key.Binding {
	return [][]key.Binding{
		{k.Up, k.Down, k.PageUp, k.PageDown, k.Top, k.Bottom},
		{k.Detail, k.Filter, k.StatusFilter, k.Sort, k.Mark, k.Copy},
		{k.Answer, k.NextInput, k.PollNow, k.NewCall},
		{k.Cancel, k.Forget, k.Prune, k.Help, k.Quit, k.Back},
	}
}
