package ui

import (
	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
)

// KeyMap is every key of the dashboard, with its help text. Destructive
// actions (cancel, forget, prune) always ask for confirmation.
type KeyMap struct {
	Up, Down, PageUp, PageDown, Top, Bottom key.Binding

	Detail, Filter, StatusFilter, Sort key.Binding
	Answer, NextInput                  key.Binding
	Cancel, Forget, Prune              key.Binding
	PollNow, NewCall, Mark, Copy       key.Binding
	// NotifyMe toggles a row's desktop notification of its changes.
	NotifyMe key.Binding
	// SetDeadline asks by when a waiting task must be answered.
	SetDeadline      key.Binding
	Help, Quit, Back key.Binding

	// Bulk work, re-run, the command palette and suspend (ops-b).
	MarkAll, MarkRange, ClearMarks key.Binding
	Rerun, Palette, Suspend        key.Binding

	// In a question: move between the answers, take the one shown, or
	// say yes or no directly.
	Choose, Pick, Confirm, Deny key.Binding
	// In the filter prompt; Older and Newer walk its history.
	Keep, Clear, Older, Newer key.Binding
	// In the detail pane (Scroll only names Up, Down, PageUp and PageDown
	// in its footer).
	Close, Scroll key.Binding
	// In a form answering an input request: leave it, or decline or
	// cancel the request (asked first).
	FormBack, Refuse key.Binding
	// In a picker; Move also in the palette, where letters are typed.
	PickBack, Move key.Binding

	// Views (ops-a): a status group (1 to 4; 2 is the inbox), every
	// group, one server's tasks, absolute or relative times.
	Groups, AllGroups, ServerView, Times key.Binding
	// The servers view (daily-ui): a row per server, enter its tasks.
	ServersView key.Binding
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
		NextInput: b("i", "next input", "i"),

		Cancel: b("c", "cancel", "c"),
		Forget: b("d", "forget", "d"),
		Prune:  b("p", "prune", "p"),

		PollNow: b("r", "poll now", "r"),
		NewCall: b("n", "new call", "n"),
		Mark:    b("space", "mark", "space"),
		// W: watch this one.
		NotifyMe:    b("W", "notify me", "W"),
		SetDeadline: b("D", "deadline", "D"),
		Copy:        b("y", "copy result", "y"),

		Help: b("?", "help", "?"),
		Quit: b("q", "quit", "q", "ctrl+c"),
		Back: b("esc", "clear filters", "esc"),

		MarkAll:    b("ctrl+a", "mark all", "ctrl+a"),
		MarkRange:  b("V", "mark range", "V", "ctrl+space"),
		ClearMarks: b("U", "unmark all", "U"),
		Rerun:      b("R", "re-run", "R"),
		Palette:    b(":", "commands", ":", "ctrl+p"),
		Suspend:    b("ctrl+z", "suspend", "ctrl+z"),

		Choose:  b("←/→", "choose", "left", "right", "h", "l", "tab", "shift+tab"),
		Pick:    b("enter", "take the chosen", "enter"),
		Confirm: b("y", "yes", "y"),
		Deny:    b("n/esc", "no", "n", "esc"),

		Keep:  b("enter", "keep", "enter"),
		Clear: b("esc", "clear", "esc"),
		Older: b("↑", "earlier search", "up"),
		Newer: b("↓", "later search", "down"),

		Close:  b("esc/enter", "back", "esc", "enter"),
		Scroll: b("↑/↓", "scroll", "up", "down", "pgup", "pgdown"),

		FormBack: b("esc", "back, nothing sent", "esc", "ctrl+c"),
		Refuse:   b("ctrl+x", "decline or cancel…", "ctrl+x"),

		PickBack: b("esc", "back", "esc"),
		Move:     b("↑/↓", "move", "up", "down"),

		Groups:     b("1-4", "groups", "1", "2", "3", "4"),
		AllGroups:  b("0", "all", "0"),
		ServerView: b("v", "server", "v"),
		Times:      b("t", "clock times", "t"),

		ServersView: b("S", "servers view", "S"),
	}
}

// ShortHelp is the table's footer line.
func (k KeyMap) ShortHelp() []key.Binding {
	return []key.Binding{k.Help, k.Palette, k.Quit, k.Detail, k.NextInput, k.Answer, k.Cancel, k.NewCall, k.Filter}
}

// FullHelp is the help screen, by column. It fits 80 columns (71 cells).
func (k KeyMap) FullHelp() [][]key.Binding {
	var cols [][]key.Binding
	for _, col := range k.tableActions() {
		var bs []key.Binding
		for _, a := range col {
			bs = append(bs, a.b)
		}
		cols = append(cols, bs)
	}
	return cols
}

// action is what a binding of the table does; the key table and the
// palette both run it.
type action struct {
	b  key.Binding
	do func(m *Model) tea.Cmd // nil for Groups: each of its keys names a group
}

// tableActions are the table's actions, by column as the help shows them.
func (k KeyMap) tableActions() [][]action {
	do := func(f func(m *Model)) func(m *Model) tea.Cmd {
		return func(m *Model) tea.Cmd { f(m); return nil }
	}
	move := func(rows func(m *Model) int) func(m *Model) tea.Cmd {
		return do(func(m *Model) { m.moveCursor(rows(m)) })
	}
	page := func(m *Model) int { return max(m.tableHeight()-1, 1) }
	all := func(m *Model) int { return len(m.list.visible) }
	return [][]action{
		{
			{k.Up, move(func(*Model) int { return -1 })},
			{k.Down, move(func(*Model) int { return 1 })},
			{k.PageUp, move(func(m *Model) int { return -page(m) })},
			{k.PageDown, move(page)},
			{k.Top, move(func(m *Model) int { return -all(m) })},
			{k.Bottom, move(all)},
			{k.Suspend, func(*Model) tea.Cmd { return tea.Suspend }},
			{k.Groups, nil},
			{k.AllGroups, do(func(m *Model) { m.showGroup(nil) })},
		},
		{
			{k.Detail, (*Model).openDetail},
			{k.Filter, func(m *Model) tea.Cmd {
				m.filtering = true
				m.detail = nil
				return m.filter.Focus()
			}},
			{k.StatusFilter, do((*Model).cycleStatusFilter)},
			{k.Sort, do(func(m *Model) {
				selected := m.selectedID()
				m.list.CycleOrder()
				m.cursor = max(m.list.IndexOf(selected), 0)
				m.clampCursor()
				m.say("sorted by " + m.list.OrderName())
			})},
			{k.Copy, (*Model).copyResult},
			{k.Palette, (*Model).openPalette},
			{k.ServerView, do((*Model).cycleServer)},
			{k.ServersView, do(func(m *Model) { m.openServers(m.list.server) })},
			{k.Times, do((*Model).toggleTimes)},
			{k.Quit, (*Model).quit},
		},
		{
			{k.Mark, do((*Model).toggleMark)},
			{k.NotifyMe, do((*Model).toggleNotifyMe)},
			{k.MarkRange, do((*Model).markRange)},
			{k.MarkAll, do((*Model).markAll)},
			{k.ClearMarks, do((*Model).clearMarks)},
			{k.Answer, (*Model).answerSelected},
			{k.SetDeadline, (*Model).askDeadline},
			{k.NextInput, do((*Model).jumpToInput)},
			{k.Back, do((*Model).back)},
		},
		{
			{k.PollNow, (*Model).pollTargets},
			{k.NewCall, (*Model).startNewCall},
			{k.Rerun, (*Model).askRerun},
			{k.Cancel, (*Model).askCancel},
			{k.Forget, (*Model).askForget},
			{k.Prune, (*Model).askPrune},
			{k.Help, do(func(m *Model) {
				m.helpOpen, m.helpTop = true, 0
				m.detail = nil
			})},
		},
	}
}

// change is a table action that changes records, and what it does, for
// a read-only dashboard to say what it will not do.
type change struct {
	b    key.Binding
	verb string
}

// changes are the table's actions that change records.
func (k KeyMap) changes() []change {
	return []change{
		{k.Answer, "answer"}, {k.Cancel, "cancel"}, {k.Forget, "forget"}, {k.Prune, "prune"},
		{k.NewCall, "make a call"}, {k.Rerun, "re-run"}, {k.SetDeadline, "set a deadline"},
	}
}

// modeKeys are the keys each mode answers to (the detail pane passes the
// table's actions through); within one mode no key may mean two things.
func (k KeyMap) modeKeys() map[mode][]key.Binding {
	var table []key.Binding
	for _, col := range k.FullHelp() {
		table = append(table, col...)
	}
	return map[mode][]key.Binding{
		modeTable:    table,
		modeDetail:   {k.Close, k.Up, k.Down, k.PageUp, k.PageDown, k.Answer, k.SetDeadline, k.Cancel, k.Forget, k.PollNow, k.Copy, k.Rerun, k.Help, k.Quit},
		modeFilter:   {k.Keep, k.Clear, k.Older, k.Newer},
		modePalette:  {k.Move, k.Pick, k.PickBack},
		modeConfirm:  {k.Choose, k.Pick, k.Confirm, k.Deny},
		modeForm:     {k.FormBack, k.Refuse},
		modePick:     {k.Up, k.Down, k.Pick, k.PickBack},
		modeDeadline: {k.Pick, k.PickBack},
		modeServers:  {k.Up, k.Down, k.Top, k.Bottom, k.Pick, k.PickBack, k.ServersView, k.Quit, k.Help},
	}
}

// shortHelp is the footer line of a mode.
func (k KeyMap) shortHelp(m mode) []key.Binding {
	switch m {
	case modeTable, modeHelp:
		return k.ShortHelp()
	case modeDetail:
		return []key.Binding{k.Close, k.Quit, k.Scroll, k.Answer, k.Cancel, k.Copy}
	case modeDeadline:
		return []key.Binding{key.NewBinding(key.WithKeys(k.Pick.Keys()...), key.WithHelp(k.Pick.Help().Key, "set the deadline")), k.PickBack}
	case modeServers:
		return []key.Binding{k.Move, key.NewBinding(key.WithKeys(k.Pick.Keys()...), key.WithHelp(k.Pick.Help().Key, "its tasks")), k.PickBack, k.Help, k.Quit}
	}
	return k.modeKeys()[m]
}
