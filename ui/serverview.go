package ui

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/present"
	"github.com/taskdeck/taskdeck/termtext"
)

// serversPane is the servers view (k9s's :servers): a row per server
// with its health; enter shows the server's tasks alone, and esc there
// comes back. The cursor is a server's name, so that it stays on its
// server as servers come and go.
type serversPane struct {
	name string
}

// serverRows are the servers the view lists: every one the header
// counts, and those whose tasks have all ended.
func (m *Model) serverRows() []*serverHealth {
	hs := m.health()
	for _, name := range m.serverNames() {
		if !slices.ContainsFunc(hs, func(h *serverHealth) bool { return h.name == name }) {
			hs = append(hs, &serverHealth{name: name})
		}
	}
	slices.SortFunc(hs, func(a, b *serverHealth) int { return strings.Compare(a.name, b.name) })
	for _, h := range hs {
		h.waiting = m.list.waitingOn[h.name]
		h.noEngine = min(m.noEngine[h.name], h.open)
		h.watchers = slices.Sorted(maps.Keys(m.watchers[h.name]))
	}
	return hs
}

// openServers opens the servers view on a server (the first when "").
func (m *Model) openServers(name string) {
	m.servers = &serversPane{name: name}
	m.detail = nil
	m.backToServers = false
	m.say("servers: enter shows a server's tasks, esc goes back")
}

// keyServers moves in the servers view; enter shows the server's tasks.
func (m *Model) keyServers(msg tea.KeyPressMsg) tea.Cmd {
	rows := m.serverRows()
	i := max(slices.IndexFunc(rows, func(h *serverHealth) bool { return h.name == m.servers.name }), 0)
	k := m.keys
	switch {
	case key.Matches(msg, k.Up):
		i--
	case key.Matches(msg, k.Down):
		i++
	case key.Matches(msg, k.Top):
		i = 0
	case key.Matches(msg, k.Bottom):
		i = len(rows) - 1
	case key.Matches(msg, k.PickBack, k.ServersView):
		m.servers = nil
		return nil
	case key.Matches(msg, k.Quit):
		return m.quit()
	case key.Matches(msg, k.Help):
		m.helpOpen, m.helpTop = true, 0
		return nil
	case key.Matches(msg, k.Pick):
		if len(rows) > 0 {
			m.drillServer(rows[i].name)
		}
		return nil
	}
	if len(rows) > 0 {
		m.servers.name = rows[max(min(i, len(rows)-1), 0)].name
	}
	return nil
}

// drillServer shows one server's tasks, every status of them; esc comes
// back to the servers view.
func (m *Model) drillServer(name string) {
	selected := m.selectedID()
	m.servers = nil
	m.backToServers = true
	m.statusFilter = ""
	m.list.status = ""
	m.list.group = nil
	m.list.server = name
	m.list.refilter()
	m.keepSelected(selected)
	m.say("showing server " + name + " (esc: back to the servers)")
}

// serverCols are the servers view's column widths.
type serverCols struct{ name, health, open, wait, push, behind, watcher, why int }

func (m *Model) serverCols() serverCols {
	c := serverCols{name: 16, health: 14, open: 5, wait: 5, push: 12, behind: 6, watcher: 20}
	if m.width < 120 {
		c.name, c.health, c.push, c.watcher = 12, 2, 5, 12
	}
	if m.width < 100 {
		c.watcher = 0 // the lines under the table name the watchers
	}
	fixed := 2 + c.name + c.health + c.open + c.wait + c.push + c.behind + c.watcher + 7
	c.why = max(m.width-fixed, 8)
	return c
}

// viewServersPane is the servers view: the column titles, a row per
// server, and under them all that is known of the selected server,
// wrapped (at 80 columns a row cannot hold its reason or its error).
func (m *Model) viewServersPane() string {
	rows := m.serverRows()
	c := m.serverCols()
	cols := func(name, health, open, wait, push, behind, watcher, why string) string {
		cells := []string{fit(name, c.name), fit(health, c.health), fitRight(open, c.open), fitRight(wait, c.wait), fit(push, c.push), fitRight(behind, c.behind)}
		if c.watcher > 0 {
			cells = append(cells, fit(watcher, c.watcher))
		}
		return strings.Join(append(cells, fit(why, c.why)), " ")
	}
	var b strings.Builder
	b.WriteString(m.styles.Header.Render(ansi.Truncate("  "+cols("SERVER", ifWide(c.health, "HEALTH", ""), "OPEN", "WAIT", "PUSH", "BEHIND", "WATCHED BY", "WHY"), m.width, "")))
	if len(rows) == 0 {
		b.WriteString("\n" + m.styles.Dim.Render("  no servers: add them under mcpServers in the config file"))
		return b.String()
	}
	i := max(slices.IndexFunc(rows, func(h *serverHealth) bool { return h.name == m.servers.name }), 0)
	about := append(append(m.aboutServer(rows[i]), m.retentionLines()...), m.notifyLines()...)
	height := max(m.tableHeight()-len(about)-1, 1)
	top := max(min(i-height/2, len(rows)-height), 0)
	for j := top; j < min(top+height, len(rows)); j++ {
		h := rows[j]
		symbol, state := h.state()
		health := symbol + " " + state
		if c.health < 3 {
			health = symbol
		}
		watcher := ""
		if len(h.watchers) > 0 {
			watcher = present.Watch(deck.PollState{Watcher: h.watchers[0]})
			if len(h.watchers) > 1 {
				watcher += fmt.Sprintf(" +%d", len(h.watchers)-1)
			}
		}
		line := "  " + cols(h.name, health, fmt.Sprint(h.open), fmt.Sprint(h.waiting), h.pushWord(), fmt.Sprint(h.behind), watcher, h.why())
		line = ansi.Truncate(line, m.width, "")
		switch {
		case j == i:
			line = m.styles.Selected.Render(line)
		case h.bad():
			line = m.styles.Error.Render(line)
		}
		b.WriteString("\n" + line)
	}
	b.WriteString("\n")
	for _, l := range about {
		b.WriteString("\n" + l)
	}
	return b.String()
}

// aboutServer is the selected server in full, wrapped to the width: the
// lines under the servers table.
func (m *Model) aboutServer(h *serverHealth) []string {
	var lines []string
	add := func(label, text string) {
		if text == "" {
			return
		}
		lines = append(lines, m.underTable(label+": "+text)...)
	}
	symbol, state := h.state()
	add(h.name, fmt.Sprintf("%s %s · %s open, %d waiting for input, %s behind", symbol, state, present.Count(h.open, "task"), h.waiting, present.Count(h.behind, "poll")))
	add("push", h.pushLine())
	add("last error", h.lastErr)
	var engines []string
	for _, w := range h.watchers {
		engines = append(engines, present.Watch(deck.PollState{Watcher: w}))
	}
	add("watched by", strings.Join(engines, "; "))
	if h.noEngine > 0 {
		add("unwatched", present.Count(h.noEngine, "open task")+" that no live engine can poll")
	}
	return lines
}

// retentionLines say the store's retention schedule, wrapped, when the
// config has one (it is the same for every server).
func (m *Model) retentionLines() []string {
	i := slices.IndexFunc(m.configured, func(s deck.Server) bool { return s.Retention != nil })
	if i < 0 {
		return nil
	}
	ago := func(at time.Time) string { return present.Age(m.now.Sub(at)) + " ago" }
	return m.underTable(present.Retention(*m.configured[i].Retention, ago))
}

// notifyLines say each event endpoint whose last delivery failed
// (issue 27): its kind, its target (the config's redacted form), since
// when it fails and why. The outbox keeps no first failure of a spell,
// so "since" is the last delivery that went through.
func (m *Model) notifyLines() []string {
	var lines []string
	for _, ep := range m.notify {
		if !ep.Failing {
			continue
		}
		since := "failing, never delivered"
		if !ep.LastOK.IsZero() {
			since = "failing since the last delivery " + present.Age(m.now.Sub(ep.LastOK)) + " ago"
		}
		text := fmt.Sprintf("%s %s %s, %d pending", cmp.Or(ep.Kind, "endpoint"), termtext.Line(ep.Target), since, ep.Pending)
		if ep.LastError != "" {
			text += fmt.Sprintf("; last error %s ago: %s", present.Age(m.now.Sub(ep.LastErrorAt)), termtext.Line(ep.LastError))
		}
		lines = append(lines, m.underTable("notify failing: "+text)...)
	}
	return lines
}

// underTable wraps a line under the servers table to the width, indented.
func (m *Model) underTable(text string) []string {
	var lines []string
	for _, l := range strings.Split(ansi.Wrap(text, max(m.width-2, 20), ""), "\n") {
		lines = append(lines, "  "+l)
	}
	return lines
}

// state is the server's health as a symbol and a word: as the header's.
func (h *serverHealth) state() (symbol, word string) {
	switch {
	case h.open == 0:
		return "·", "idle"
	case h.failing >= h.open:
		return "✗", "unreachable"
	case h.failing > 0:
		return pollFailedSymbol, fmt.Sprintf("%d failing", h.failing)
	}
	return "✓", "ok"
}

func (h *serverHealth) bad() bool { return h.open > 0 && h.failing > 0 }

// pushWord is the PUSH cell: the stream's state in a word.
func (h *serverHealth) pushWord() string {
	switch h.push {
	case deck.PushUp:
		return "up"
	case deck.PushDown:
		return "down"
	case deck.PushNotOffered:
		return "none"
	}
	return "-"
}

// pushLine says how the server's open tasks are followed, and why its
// stream is down or not offered.
func (h *serverHealth) pushLine() string {
	var parts []string
	switch h.push {
	case deck.PushUp:
		parts = append(parts, "stream up")
	case deck.PushDown:
		parts = append(parts, "stream down, re-subscribing")
	case deck.PushNotOffered:
		parts = append(parts, "not offered by the server")
	default:
		parts = append(parts, "no stream asked for yet")
	}
	if h.pushErr != "" {
		parts[0] += ": " + h.pushErr
	}
	if h.open > 0 {
		parts = append(parts, fmt.Sprintf("%d of %d open pushed, %d polled", h.pushed, h.open, h.open-h.pushed))
	}
	return strings.Join(parts, " · ")
}

// why is the WHY cell: what is wrong, the poll error first.
func (h *serverHealth) why() string {
	switch {
	case h.bad() && h.lastErr != "":
		return strings.TrimPrefix(h.lastErr, "server "+h.name+" unreachable: ")
	case h.pushErr != "" && h.open > 0:
		return "push: " + h.pushErr
	case h.noEngine > 0:
		return present.Count(h.noEngine, "task") + " no engine polls"
	}
	return ""
}

// fitRight is fit, right-aligned (numbers).
func fitRight(s string, w int) string {
	if n := ansi.StringWidth(s); n < w {
		return strings.Repeat(" ", w-n) + s
	}
	return fit(s, w)
}
