package ui

import (
	"fmt"
	"slices"
	"strings"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/present"
	"github.com/taskdeck/taskdeck/termtext"
)

// headerLines and footerLines frame the table.
const (
	headerLines = 3 // counts, groups and servers, then the column titles
	footerLines = 2 // status line, then key help
)

// View renders the screen. It does no IO and formats only visible rows.
func (m *Model) View() tea.View {
	var body string
	switch mode := m.mode(); mode {
	case modeHelp:
		body = m.viewHelp()
	case modeDetail:
		body = m.detail.View()
	case modeConfirm:
		// A question asked from a form stands alone; one about tasks
		// stands above the table.
		body = m.question.View(m.styles, m.boxWidth())
		if m.form == nil {
			body += "\n" + m.viewTable()
		}
	case modePick:
		rows := max(m.height-headerLines-footerLines-6, 3)
		if m.serverPick != nil {
			body = m.serverPick.View(m.styles, m.boxWidth(), rows)
		} else {
			body = m.toolPick.View(m.styles, m.boxWidth(), rows)
		}
	case modePalette:
		body = m.palette.View(m.styles, m.boxWidth(), max(m.height-headerLines-footerLines-7, 3))
	case modeForm:
		body = m.box(m.form.form.View())
	case modeServers:
		body = m.viewServersPane()
	default:
		body = m.viewTable()
	}
	// Joined as they are: padding every line to the widest (JoinVertical)
	// measured each line's width again, a third of a frame.
	screen := strings.Join([]string{m.viewCounts(), m.viewGroupsAndServers(), body}, "\n")
	screen = fitHeight(screen, m.height-footerLines) + "\n" + m.viewFooter()
	v := tea.NewView(screen)
	v.AltScreen = true
	if m.mouse {
		v.MouseMode = tea.MouseModeCellMotion
	}
	v.WindowTitle = "taskdeck"
	return v
}

// viewCounts is the top line: tasks per status, and the open tasks
// about to expire. (The next line has the groups, whose inbox tab says
// who waits for input, and the servers.)
func (m *Model) viewCounts() string {
	parts := []string{m.styles.Title.Render("taskdeck")}
	if d := m.storeDown; d != nil { // first of all: nothing is polled or recorded meanwhile
		parts = append(parts, m.styles.Error.Render(fmt.Sprintf("database unreachable since %s — polling paused, retrying: %s",
			d.Since.Local().Format("15:04:05"), termtext.Line(d.Error))))
	}
	if m.bulk != nil { // first, so that a narrow terminal still shows it
		parts = append(parts, m.styles.Title.Render(m.bulk.verb+" "+m.bulkProgress()+" …"))
	}
	if !m.loaded {
		parts = append(parts, m.styles.Dim.Render("loading…"))
	}
	if m.filling != nil {
		parts = append(parts, m.styles.Dim.Render("loading the open tasks…"))
	}
	if r := m.reconcile; r != nil && r.Total > 0 {
		parts = append(parts, m.styles.Dim.Render(fmt.Sprintf("reconciling %d/%d …", r.Done, r.Total)))
	}
	if m.expiring > 0 {
		parts = append(parts, m.styles.Error.Render(fmt.Sprintf("! %d open expire soon", m.expiring)))
	}
	for _, st := range model.AllStatuses {
		if n := m.list.stored(st); n > 0 {
			look := statusLooks[st]
			parts = append(parts, m.styles.Status[st].Render(fmt.Sprintf("%s %d %s", look.Symbol, n, st)))
		}
	}
	return ansi.Truncate(strings.Join(parts, "  "), m.width, "…")
}

// columns are the table's column widths for the current terminal width;
// agent is 0 while no record names an agent.
type columns struct{ id, status, server, tool, agent, msg, age, changed, next, exp int }

// narrowStatus is the status column's width below 100 columns: the
// symbol alone (the count line and the help say what each means).
const narrowStatus = 1

func (m *Model) columns() columns {
	c := columns{id: m.idWidth(), status: 16, server: 16, tool: 14, age: 5, changed: 7, next: 6, exp: 5}
	agents := m.list.hasAgents()
	if agents {
		c.agent = 12
	}
	if m.width < 120 { // the message keeps room
		c.server, c.tool = 12, 12
		if agents {
			c.agent = 10
		}
	}
	if m.width < 100 {
		// Five cells hold 9m59s, and 15:04 with t.
		c.status, c.server, c.tool, c.age, c.changed, c.next, c.exp = narrowStatus, 8, 10, 5, 5, 5, 5
		if agents {
			c.agent = 8
		}
	}
	fixed := 2 + c.id + c.status + c.server + c.tool + c.age + c.changed + c.next + c.exp + 9 // gaps
	if c.agent > 0 {
		fixed += c.agent + 1
	}
	c.msg = max(m.width-fixed, 8)
	return c
}

func (m *Model) tableHeight() int { return max(m.height-headerLines-footerLines, 1) }

func (m *Model) viewTable() string {
	c := m.columns()
	titles := []string{"  " + fit("ID", c.id), fit(ifWide(c.status, "STATUS", "S"), c.status), fit("SERVER", c.server), fit("TOOL", c.tool)}
	if c.agent > 0 {
		titles = append(titles, fit("AGENT", c.agent))
	}
	titles = append(titles, fit("MESSAGE", c.msg),
		fit(m.ageTitle(c.age), c.age), fit(ifWide(c.changed, "CHANGED", "CHG"), c.changed), fit("NEXT", c.next), fit("EXP", c.exp))
	var b strings.Builder
	b.WriteString(m.styles.Header.Render(ansi.Truncate(strings.Join(titles, " "), m.width, "")))
	rows := m.list.visible
	end := min(m.top+m.tableHeight(), len(rows))
	for i := m.top; i < end; i++ {
		b.WriteByte('\n')
		b.WriteString(m.viewRow(rows[i], c, i == m.cursor))
	}
	if len(rows) == 0 {
		b.WriteString("\n" + m.styles.Dim.Render(m.emptyText()))
	}
	return b.String()
}

func (m *Model) emptyText() string {
	switch {
	case !m.loaded:
		return "  loading the store…"
	case m.list.Len() == 0:
		return "  no tasks yet: press n to call a tool, or run `taskdeck call`"
	case m.inInbox() && m.filter.Value() == "" && m.list.server == "" && m.list.agent == "":
		return "  no task waits for your answer (0 shows every task)"
	}
	return "  no task matches the filter (esc clears it, s changes the status filter)"
}

func (m *Model) viewRow(r *row, c columns, selected bool) string {
	t := r.task
	marked := m.marked[t.ID]
	// A marked row is drawn in the marked style (bold) beside its *, so
	// that marks read at a glance; its coloured cells keep their colour.
	plain := func(s string) string {
		if marked && !selected {
			return m.styles.Marked.Render(s)
		}
		return s
	}
	mark := " "
	switch {
	case marked:
		mark = "*"
	case m.notifyMe[t.ID]:
		mark = notifyMeMark
	}
	symbol := lookOf(t).Symbol
	msg := fit(r.msg, c.msg)
	pollErr := m.polls[t.ID].LastError
	if m.pending(t.ID) {
		msg = fit(m.bulk.verb+"…", c.msg) // until the bulk action has done this one
	}
	if pollErr != "" {
		// Its state is the last one heard, which may no longer be true.
		symbol = pollFailedSymbol
		msg = fit("poll failed: "+termtext.Line(pollErr), c.msg)
	}
	status := fit(symbol+" "+string(t.Status), c.status)
	if c.status == narrowStatus {
		status = fit(symbol, c.status)
	}
	// The selected row is drawn in reverse as a whole, so its cells stay
	// unstyled; other rows colour their status (and a poll error).
	switch {
	case selected:
	case pollErr != "":
		status, msg = m.styles.Error.Render(m.styles.statusStyle(t).Render(status)), m.styles.Error.Render(msg)
	default:
		status, msg = m.styles.statusStyle(t).Render(status), plain(msg)
	}
	exp, warn := m.expiry(t)
	exp = fit(exp, c.exp)
	if warn && !selected {
		exp = m.styles.Error.Render(exp)
	}
	cells := []string{mark, plain(fit(m.list.shortID(t.ID), c.id)), status, plain(fit(r.server, c.server)), plain(fit(r.tool, c.tool))}
	if c.agent > 0 {
		cells = append(cells, plain(fit(r.agent, c.agent)))
	}
	cells = append(cells, msg, plain(fit(m.ageCell(r), c.age)), plain(fit(m.when(t.UpdatedAt), c.changed)),
		plain(fit(m.nextPoll(t), c.next)), exp)
	line := ansi.Truncate(strings.Join(cells, " "), m.width, "")
	if selected {
		return m.styles.Selected.Render(line)
	}
	return line
}

// nextPoll says when the engine polls a task next: a countdown, "now"
// once it is due (or in flight), "push" for a task its server pushes
// (whose next poll is only the slow safety poll), nothing for tasks that
// are not polled, "none" for a task no engine on a shared store can reach.
func (m *Model) nextPoll(t *model.Task) string {
	at := m.polls[t.ID].Next
	switch {
	case !t.Pollable():
		return ""
	case m.polls[t.ID].NoEngine:
		return "none"
	case at.IsZero():
		return ""
	case m.polls[t.ID].Pushed:
		return "push"
	case !at.After(m.now):
		return "now"
	}
	return present.Age(at.Sub(m.now))
}

func (m *Model) viewFooter() string {
	style := m.styles.Flash
	if m.flashErr {
		style = m.styles.Error
	}
	flash := style.Render(m.flash)
	for i, n := range m.notices {
		text := n.text
		if i > 0 || m.flash != "" {
			text = " · " + text
		}
		noticeStyle := m.styles.Flash
		if n.err {
			noticeStyle = m.styles.Error
		}
		flash += noticeStyle.Render(text)
	}
	info := fmt.Sprintf("%d/%d", min(m.cursor+1, len(m.list.visible)), len(m.list.visible))
	if m.list.Len() != len(m.list.visible) {
		info += fmt.Sprintf(" of %d", m.list.Len())
	}
	if m.hidden > 0 {
		info += fmt.Sprintf(" (+%d older finished not shown)", m.hidden)
	}
	info += " · sort: " + m.list.OrderName()
	if m.statusFilter != "" {
		info += " · status: " + string(m.statusFilter)
	}
	if g := m.list.group; g != nil {
		info += " · group: " + g.Title
	}
	if m.list.server != "" {
		info += " · server: " + m.list.server
	}
	if m.list.agent != "" {
		info += " · agent: " + m.list.agent
	}
	if m.filtering || m.filter.Value() != "" {
		info += " · " + m.filter.View()
	}

	if len(m.marked) > 0 {
		info += fmt.Sprintf(" · %d marked", len(m.marked))
		if hidden := m.hiddenMarks(); hidden > 0 {
			info += fmt.Sprintf(" (%d hidden, not acted on)", hidden)
		}
	}
	status := m.styles.Dim.Render(info) + "  " + flash
	if m.deadline != nil {
		status = m.deadline.input.View() + "  " + flash // the prompt first: nothing cuts it
	}
	status = ansi.Truncate(status, m.width, "…")
	keys := m.keys.shortHelp(m.mode())
	if m.question != nil && len(m.question.choices) > 1 {
		keys = slices.DeleteFunc(slices.Clone(keys), func(b key.Binding) bool { return b.Help() == m.keys.Confirm.Help() }) // y picks only a lone yes
	}
	return status + "\n" + ansi.Truncate(m.help.ShortHelpView(keys), m.width, "…")
}

// helpText is the whole help: the keys by column, then the legend.
func (m *Model) helpText() []string {
	var b strings.Builder
	b.WriteString(m.help.FullHelpView(m.keys.FullHelp()))
	b.WriteString("\n\nIn a form: esc back (nothing sent) · ctrl+x decline or cancel the request\n")
	b.WriteString("Statuses (below 100 columns the table shows the symbol alone):\n")
	for _, st := range model.AllStatuses {
		look := statusLooks[st]
		b.WriteString("  " + m.styles.Status[st].Render(look.Symbol+" "+string(st)) + "\n")
	}
	b.WriteString("  " + m.styles.ToolError.Render(toolErrorLook.Symbol+" completed") + " with a tool error\n")
	b.WriteString("  " + m.styles.Error.Render(pollFailedSymbol) + " its last polls failed")
	return strings.Split(b.String(), "\n")
}

// helpRows is how many lines of the help the screen shows at once: the
// screen but the two header lines, the last line (what keys do here) and
// the footer.
func (m *Model) helpRows() int { return max(m.height-2-1-footerLines, 1) }

// viewHelp is the help from helpTop on; its last line says what scrolls
// it and how much is left, so that a short screen clips nothing unseen.
func (m *Model) viewHelp() string {
	lines := m.helpText()
	rows := m.helpRows()
	top := max(min(m.helpTop, len(lines)-rows), 0)
	end := min(top+rows, len(lines))
	out := append([]string(nil), lines[top:end]...)
	switch {
	case end < len(lines):
		out = append(out, m.styles.Dim.Render(fmt.Sprintf("↓ %d more lines (↑/↓, pgup/pgdn scroll) · any other key closes this help", len(lines)-end)))
	case top > 0:
		out = append(out, m.styles.Dim.Render("↑ scrolls back · any other key closes this help"))
	default:
		out = append(out, "any key closes this help")
	}
	return strings.Join(out, "\n")
}

// keyHelp scrolls the help, or closes it.
func (m *Model) keyHelp(msg tea.KeyPressMsg) {
	k := m.keys
	last := max(len(m.helpText())-m.helpRows(), 0)
	switch {
	case key.Matches(msg, k.Up):
		m.helpTop--
	case key.Matches(msg, k.Down):
		m.helpTop++
	case key.Matches(msg, k.PageUp):
		m.helpTop -= m.helpRows()
	case key.Matches(msg, k.PageDown):
		m.helpTop += m.helpRows()
	default:
		m.helpOpen = false
	}
	m.helpTop = max(min(m.helpTop, last), 0)
}

func (m *Model) box(s string) string {
	return m.styles.Box.Width(m.boxWidth()).Render(s)
}

func (m *Model) boxWidth() int { return min(m.width, 100) }

func ifWide(w int, wide, narrow string) string {
	if w >= len(wide) {
		return wide
	}
	return narrow
}

// fit truncates or pads plain text to exactly w cells.
func fit(s string, w int) string {
	if w > 0 && termtext.PrintableASCII(s) { // most cells: a byte a column, no grapheme walk
		if len(s) > w {
			return s[:w-1] + "…"
		}
		return s + strings.Repeat(" ", w-len(s))
	}
	s = ansi.Truncate(s, w, "…")
	if pad := w - ansi.StringWidth(s); pad > 0 {
		s += strings.Repeat(" ", pad)
	}
	return s
}

// fitHeight pads or cuts a block to exactly h lines.
func fitHeight(s string, h int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > h {
		lines = lines[:h]
	}
	for len(lines) < h {
		lines = append(lines, "")
	}
	return strings.Join(lines, "\n")
}
