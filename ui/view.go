package ui

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/termtext"
	"github.com/taskdeck/taskdeck/ui/present"
)

// headerLines and footerLines frame the table.
const (
	headerLines = 2 // counts, then the column titles
	footerLines = 2 // status line, then key help
)

// View renders the screen. It does no IO and formats only visible rows.
func (m *Model) View() tea.View {
	var body string
	switch m.mode {
	case modeHelp:
		body = m.viewHelp()
	case modeDetail:
		body = m.detail.View()
	case modeConfirm:
		body = m.viewConfirm()
	case modePick:
		body = m.viewPick()
	case modeForm:
		body = m.box(m.form.View())
	default:
		body = m.viewTable()
	}
	screen := lipgloss.JoinVertical(lipgloss.Left, m.viewCounts(), body)
	screen = fitHeight(screen, m.height-footerLines) + "\n" + m.viewFooter()
	v := tea.NewView(screen)
	v.AltScreen = true
	v.WindowTitle = "taskdeck"
	return v
}

// viewCounts is the top line: tasks per status, and who waits for input.
func (m *Model) viewCounts() string {
	parts := []string{m.styles.Title.Render("taskdeck")}
	for _, st := range model.AllStatuses {
		if n := m.list.counts[st]; n > 0 {
			look := statusLooks[st]
			parts = append(parts, m.styles.Status[st].Render(fmt.Sprintf("%s %d %s", look.Symbol, n, st)))
		}
	}
	if n := m.list.waiting; n > 0 {
		parts = append(parts, m.styles.Status[model.StatusInputRequired].Bold(true).Render(waitText(n)))
	}
	if !m.loaded {
		parts = append(parts, m.styles.Dim.Render("loading…"))
	}
	return ansi.Truncate(strings.Join(parts, "  "), m.width, "…")
}

func waitText(n int) string {
	if n == 1 {
		return "1 task waits for input"
	}
	return fmt.Sprintf("%d tasks wait for input", n)
}

// columns are the table's column widths for the current terminal width.
type columns struct{ status, server, tool, msg, age, changed, next int }

func (m *Model) columns() columns {
	c := columns{status: 16, server: 14, tool: 14, age: 5, changed: 7, next: 6}
	if m.width < 100 {
		c.server, c.tool, c.age, c.changed, c.next = 8, 10, 4, 4, 4
	}
	fixed := 2 + c.status + c.server + c.tool + c.age + c.changed + c.next + 7 // gaps
	c.msg = max(m.width-fixed, 8)
	return c
}

func (m *Model) tableHeight() int { return max(m.height-headerLines-footerLines, 1) }

func (m *Model) viewTable() string {
	c := m.columns()
	var b strings.Builder
	b.WriteString(m.styles.Header.Render(ansi.Truncate(strings.Join([]string{
		"  " + fit("STATUS", c.status), fit("SERVER", c.server), fit("TOOL", c.tool), fit("MESSAGE", c.msg),
		fit("AGE", c.age), fit(ifWide(c.changed, "CHANGED", "CHG"), c.changed), fit("NEXT", c.next)}, " "), m.width, "")))
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
	}
	return "  no task matches the filter (esc clears it, s changes the status filter)"
}

func (m *Model) viewRow(r *row, c columns, selected bool) string {
	t := r.task
	mark := " "
	if m.marked[t.ID] {
		mark = "*"
	}
	status := fit(lookOf(t).Symbol+" "+string(t.Status), c.status)
	msg := fit(r.msg, c.msg)
	pollErr := m.polls[t.ID].err
	if pollErr != nil {
		// Its state is the last one heard, which may no longer be true.
		status = fit(pollFailedSymbol+" "+string(t.Status), c.status)
		msg = fit("poll failed: "+termtext.Line(pollErr.Error()), c.msg)
	}
	// The selected row is drawn in reverse as a whole, so its cells stay
	// unstyled; other rows colour their status (and a poll error).
	if !selected {
		status = m.styles.statusStyle(t).Render(status)
		if pollErr != nil {
			status, msg = m.styles.Error.Render(status), m.styles.Error.Render(msg)
		}
	}
	line := strings.Join([]string{mark, status, fit(r.server, c.server), fit(r.tool, c.tool), msg,
		fit(present.Age(m.now.Sub(t.CreatedAt)), c.age), fit(present.Age(m.now.Sub(t.UpdatedAt)), c.changed),
		fit(m.nextPoll(t), c.next)}, " ")
	line = ansi.Truncate(line, m.width, "")
	if selected {
		return m.styles.Selected.Render(line)
	}
	return line
}

// nextPoll says when a task is polled next: "now" while a poll is in
// flight, a countdown otherwise, nothing for tasks that are not polled.
func (m *Model) nextPoll(t *model.Task) string {
	at, inFlight, ok := m.sched.Due(t.ID)
	switch {
	case !ok:
		return ""
	case inFlight:
		return "now"
	}
	return present.Age(at.Sub(m.now))
}

func (m *Model) viewFooter() string {
	flash := m.flash
	style := m.styles.Flash
	if m.flashErr {
		style = m.styles.Error
	}
	info := fmt.Sprintf("%d/%d", min(m.cursor+1, len(m.list.visible)), len(m.list.visible))
	if m.list.Len() != len(m.list.visible) {
		info += fmt.Sprintf(" of %d", m.list.Len())
	}
	switch {
	case m.recentPending():
		info += " (loading finished tasks…)"
	case m.hidden > 0:
		info += fmt.Sprintf(" (+%d older finished not shown)", m.hidden)
	}
	info += " · sort: " + m.list.OrderName()
	if m.statusFilter != "" {
		info += " · status: " + string(m.statusFilter)
	}
	if m.mode == modeFilter || m.filter.Value() != "" {
		info += " · " + m.filter.View()
	}
	if len(m.marked) > 0 {
		info += fmt.Sprintf(" · %d marked", len(m.marked))
		if hidden := m.hiddenMarks(); hidden > 0 {
			info += fmt.Sprintf(" (%d hidden, not acted on)", hidden)
		}
	}
	status := ansi.Truncate(m.styles.Dim.Render(info)+"  "+style.Render(flash), m.width, "…")
	keys := m.keys.shortHelp(m.mode)
	if m.mode == modeConfirm && len(m.confirm.choices) > 1 {
		keys = slices.DeleteFunc(slices.Clone(keys), func(b key.Binding) bool { return b.Help() == m.keys.Confirm.Help() }) // y picks only a lone yes
	}
	return status + "\n" + ansi.Truncate(m.help.ShortHelpView(keys), m.width, "…")
}

// hiddenMarks counts the marked tasks the filter hides.
func (m *Model) hiddenMarks() int {
	n := 0
	for id := range m.marked {
		if m.list.IndexOf(id) < 0 {
			n++
		}
	}
	return n
}

// maxTargets bounds the tasks a question lists by name.
const maxTargets = 8

// viewConfirm is the question above the table: what it acts on, and its
// answers, the chosen one in reverse and in brackets (which read without
// colour too). No is first, and chosen until another is.
func (m *Model) viewConfirm() string {
	c := m.confirm
	var b strings.Builder
	b.WriteString(m.styles.Title.Render(c.question) + "\n")
	for i, t := range c.targets {
		if i == maxTargets {
			b.WriteString(fmt.Sprintf("  … and %d more\n", len(c.targets)-maxTargets))
			break
		}
		b.WriteString("  " + t + "\n")
	}
	b.WriteString("\n")
	for i, label := range append([]string{"No"}, choiceLabels(c.choices)...) {
		if i == c.cursor {
			b.WriteString(m.styles.Selected.Render("[ "+label+" ]") + "  ")
		} else {
			b.WriteString("  " + label + "    ")
		}
	}
	box := m.box(strings.TrimRight(b.String(), " "))
	if c.back == modeForm {
		return box
	}
	return box + "\n" + m.viewTable()
}

func choiceLabels(cs []choice) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.label
	}
	return out
}

func (m *Model) viewHelp() string {
	var b strings.Builder
	b.WriteString(m.help.FullHelpView(m.keys.FullHelp()))
	b.WriteString("\n\nIn a form: esc back (nothing sent) · ctrl+x decline or cancel the request\n")
	b.WriteString("Statuses:\n")
	for _, st := range model.AllStatuses {
		look := statusLooks[st]
		b.WriteString("  " + m.styles.Status[st].Render(look.Symbol+" "+string(st)) + "\n")
	}
	b.WriteString("  " + m.styles.ToolError.Render(toolErrorLook.Symbol+" completed") + " with a tool error\n")
	b.WriteString("  " + m.styles.Error.Render(pollFailedSymbol) + " its last polls failed\n")
	b.WriteString("\nany key closes this help")
	return b.String()
}

func (m *Model) viewPick() string {
	p := m.pick
	var b strings.Builder
	b.WriteString(m.styles.Title.Render(p.title) + "\n\n")
	h := max(m.height-headerLines-footerLines-6, 3)
	start := max(0, min(p.cursor-h/2, len(p.items)-h))
	inner := m.boxWidth() - 4 // the border and padding
	width := 0                // of the widest item, so that the notes stand in a column
	for _, item := range p.items {
		width = max(width, ansi.StringWidth(item))
	}
	for i := start; i < min(start+h, len(p.items)); i++ {
		name, note := fit(p.items[i], width), ""
		if i < len(p.notes) && p.notes[i] != "" {
			note = "  " + p.notes[i]
		}
		line := "  " + name + m.styles.Dim.Render(note)
		if i == p.cursor {
			line = m.styles.Selected.Render("> "+name) + note
		}
		b.WriteString(ansi.Truncate(line, inner, "…") + "\n")
	}
	b.WriteString("\nenter choose · esc back")
	return m.box(b.String())
}

func (m *Model) box(s string) string {
	return m.styles.Box.Width(m.boxWidth()).Render(s)
}

func (m *Model) boxWidth() int { return min(m.width, 100) }

// detailText is everything about one task, for the detail pane.
func (m *Model) detailText(t *model.Task) string {
	var b strings.Builder
	pad := strings.Repeat(" ", m.styles.Label.GetWidth()+1)
	line := func(label, value string) {
		if value != "" {
			b.WriteString(m.styles.Label.Render(label) + " " + strings.ReplaceAll(value, "\n", "\n"+pad) + "\n")
		}
	}
	look := lookOf(t)
	line("task", t.ID)
	line("status", m.styles.statusStyle(t).Render(look.Symbol+" "+present.StatusText(t)))
	line("server", termtext.Line(t.Server.String()))
	line("tool", termtext.Line(t.Tool))
	line("arguments", present.PrettyJSON(termtext.Sanitize(string(t.Arguments), true)))
	line("key", termtext.Line(t.IdempotencyKey))
	line("created", t.CreatedAt.Local().Format(time.DateTime))
	line("changed", t.UpdatedAt.Local().Format(time.DateTime))
	if t.StatusMessage != "" {
		b.WriteString("\n" + m.styles.Title.Render("Status message") + "\n" + termtext.Sanitize(t.StatusMessage, true) + "\n")
	}
	if inputs := present.Inputs(t); len(inputs) > 0 {
		b.WriteString("\n" + m.styles.Title.Render("Waiting for input") + " (press a to answer)\n")
		for _, in := range inputs {
			b.WriteString("  " + in.Key + ": " + in.Message + "\n")
			if in.URL != "" {
				b.WriteString("    URL: " + in.URL + "\n")
			}
			if len(in.Fields) > 0 {
				b.WriteString("    fields: " + strings.Join(in.Fields, ", ") + "\n")
			}
		}
	}
	if r := present.Result(t); r != "" {
		b.WriteString("\n" + m.styles.Title.Render("Result") + " (y copies it as JSON)\n" + r + "\n")
	}
	if t.Error != nil {
		b.WriteString("\n" + m.styles.Title.Render("Error") + "\n" + m.styles.Error.Render(fmt.Sprintf("%d %s", t.Error.Code, termtext.Line(t.Error.Message))) + "\n")
	}
	if t.LocalError != "" {
		b.WriteString("\n" + m.styles.Title.Render("Local error") + "\n" + termtext.Line(t.LocalError) + "\n")
	}
	b.WriteString("\n" + m.styles.Title.Render("Polling") + "\n")
	ps := m.tracker.PollStatus(t.ID)
	switch {
	case !t.Status.Pollable():
		b.WriteString("  not polled: " + string(t.Status) + "\n")
	default:
		if !ps.LastPolled.IsZero() {
			b.WriteString("  last poll " + present.Age(m.now.Sub(ps.LastPolled)) + " ago")
		}
		if next := m.nextPoll(t); next != "" {
			b.WriteString(", next in " + next)
		}
		b.WriteString("\n")
		if ps.LastError != nil {
			b.WriteString("  " + m.styles.Error.Render(fmt.Sprintf("last error (%d in a row): %s", ps.Errors, termtext.Line(ps.LastError.Error()))) + "\n")
		}
	}
	b.WriteString("\n" + m.styles.Title.Render("History") + "\n")
	for _, h := range present.History(t, time.TimeOnly) {
		b.WriteString("  " + h + "\n")
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func ifWide(w int, wide, narrow string) string {
	if w >= len(wide) {
		return wide
	}
	return narrow
}

// fit truncates or pads plain text to exactly w cells.
func fit(s string, w int) string {
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
