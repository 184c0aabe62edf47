package ui

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/present"
	"github.com/taskdeck/taskdeck/termtext"
)

// serversEvery is how often the servers are listed again, for their
// push state (the feed says each task's, not the stream's).
const serversEvery = 5 * time.Second

// onTickViews counts what only time moves, and every serversEvery lists
// the servers again.
func (m *Model) onTickViews() tea.Cmd {
	m.refreshHealth()
	m.ticks++
	// One listing at a time: a stalled owner must not pile them up.
	if every := int(serversEvery / tickEvery); every > 0 && m.ticks%every == 0 && !m.listingServers {
		m.listingServers = true
		return listServers(m.ctx, m.deck)
	}
	return nil
}

// onServers takes the servers as listed: their push state always, the
// rows renamed only when the servers changed (a pass over every row).
func (m *Model) onServers(servers []deck.Server) {
	same := m.configured != nil && slices.EqualFunc(m.configured, servers, func(a, b deck.Server) bool {
		return a.Name == b.Name && a.Target == b.Target && a.Stdio == b.Stdio
	})
	m.configured = servers
	if !same {
		m.nameServers()
	}
}

// nameServers shows every row's server by its readable name, once the
// configured servers are known.
func (m *Model) nameServers() {
	configured := m.configured
	m.list.names = func(ref model.ServerRef) string { return present.ServerName(ref, configured) }
	selected := m.selectedID()
	tasks := make([]*model.Task, 0, len(m.list.all))
	for _, r := range m.list.all {
		tasks = append(tasks, r.task)
	}
	m.list.Replace(tasks)
	m.keepSelected(selected)
	m.refreshHealth()
}

// serverNames are the servers the view cycles through: the configured
// ones and every other one a task names.
func (m *Model) serverNames() []string {
	seen := map[string]bool{}
	for _, s := range m.configured {
		seen[termtext.Line(s.Name)] = true
	}
	for name, n := range m.list.servers {
		if n > 0 {
			seen[name] = true
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

// cycleServer shows the next server's tasks alone (as k9s namespaces),
// then every server again.
func (m *Model) cycleServer() {
	names := m.serverNames()
	i := slices.Index(names, m.list.server) // -1 for all
	next := ""
	if i+1 < len(names) {
		next = names[i+1]
	}
	selected := m.selectedID()
	m.list.server = next
	m.list.refilter()
	m.cursor = max(m.list.IndexOf(selected), 0)
	m.clampCursor()
	if next == "" {
		m.say("showing every server")
	} else {
		m.say("showing server " + next + " (v: next server)")
	}
}

// serverHealth is one server as the header shows it.
type serverHealth struct {
	name    string
	open    int    // its working and waiting tasks
	failing int    // of them, those whose last poll failed
	behind  int    // of them, those whose poll is overdue (counted on the tick)
	pushed  int    // of them, those the server pushes (counted on the tick)
	push    string // the push stream's state (deck.Server.Push), and why it is down
	pushErr string
	lastErr string // the latest poll error
	lastAt  time.Time
	// For the servers view (serverview.go): its tasks that wait for
	// input, those no live engine can poll, and the engines that poll
	// them on a shared store.
	waiting, noEngine int
	watchers          []string
}

// maxHeaderErr bounds a server's last error in the header (the detail
// pane and the row have all of it).
const maxHeaderErr = 40

// behindAfter is how late a poll must be to count as behind.
const behindAfter = time.Second

// refreshHealth counts, on the clock's tick, what only time moves: the
// polls overdue per server, and the open tasks about to expire. A pass
// over the open tasks costs more than a frame may at 100,000 tasks.
func (m *Model) refreshHealth() {
	clear(m.behind)
	clear(m.pushed)
	clear(m.noEngine)
	clear(m.watchers)
	for id, p := range m.polls {
		r, ok := m.list.byID[id]
		if !ok || !r.task.Pollable() {
			continue
		}
		if p.NoEngine {
			m.noEngine[r.server]++
		}
		if p.Watcher != "" {
			if m.watchers[r.server] == nil {
				m.watchers[r.server] = map[string]int{}
			}
			m.watchers[r.server][p.Watcher]++
		}
		if !p.Next.IsZero() && m.now.Sub(p.Next) > behindAfter {
			m.behind[r.server]++
		}
		if p.Pushed {
			m.pushed[r.server]++
		}
	}
	m.expiring = m.expiringSoon()
}

// health is every server's health, from the counts kept as rows come
// and go and the tasks whose polls fail (few, unless a server is down).
func (m *Model) health() []*serverHealth {
	by := map[string]*serverHealth{}
	get := func(name string) *serverHealth {
		h := by[name]
		if h == nil {
			// behind and pushed are counted on the tick, open as rows come
			// and go: between two ticks tasks may have ended.
			open := m.list.open[name]
			h = &serverHealth{name: name, open: open, behind: min(m.behind[name], open), pushed: min(m.pushed[name], open)}
			by[name] = h
		}
		return h
	}
	for _, s := range m.configured {
		h := get(termtext.Line(s.Name))
		h.push, h.pushErr = s.Push, termtext.Line(s.PushError)
	}
	for name, n := range m.list.open {
		if n > 0 {
			get(name)
		}
	}
	for id := range m.list.failing {
		r, ok := m.list.byID[id]
		if !ok || !m.list.pollFails(r) {
			continue
		}
		h, p := get(r.server), m.polls[id]
		h.failing++
		if h.lastErr == "" || p.LastPolled.After(h.lastAt) {
			h.lastErr, h.lastAt = termtext.Line(p.LastError), p.LastPolled
		}
	}
	return slices.SortedFunc(maps.Values(by), func(a, b *serverHealth) int { return cmp.Compare(a.name, b.name) })
}

// viewGroupsAndServers is the second line: the group tabs, then the
// servers; their last errors only where the line has room for them.
func (m *Model) viewGroupsAndServers() string {
	groups := m.viewGroups() + "  "
	line := groups + m.viewServers(true, true)
	if ansi.StringWidth(line) > m.width {
		line = groups + m.viewServers(false, true)
	}
	if ansi.StringWidth(line) > m.width { // the servers view has the reasons
		line = groups + m.viewServers(false, false)
	}
	if ansi.StringWidth(line) > m.width {
		line = groups + m.serversSummary()
	}
	return ansi.Truncate(line, m.width, "…")
}

// serversSummary is the servers' health where the line cannot name each
// one (80 columns, ten servers at 120): how many are in each state, the
// troubled ones by name, and the key of the servers view, which lists
// them all. The counts and the key come first, so a cut takes names.
func (m *Model) serversSummary() string {
	count := map[string]int{}
	var troubled []string
	for _, h := range m.health() {
		symbol, _ := h.state()
		count[symbol]++
		if h.bad() {
			troubled = append(troubled, symbol+" "+h.name)
		}
	}
	parts := []string{m.styles.Dim.Render("servers")}
	for _, symbol := range []string{"✗", pollFailedSymbol, "✓", "·"} {
		if n := count[symbol]; n > 0 {
			s := fmt.Sprintf("%s%d", symbol, n)
			if symbol == "✗" || symbol == pollFailedSymbol {
				s = m.styles.Error.Render(s)
			}
			parts = append(parts, s)
		}
	}
	parts = append(parts, m.styles.Dim.Render("(S)"))
	if len(troubled) > 0 {
		parts = append(parts, m.styles.Error.Render(strings.Join(troubled, " ")))
	}
	return strings.Join(parts, " ")
}

// viewServers is each server's health, the one shown alone in brackets:
// ✓ polls answer, ⚠ some fail, ✗ every one fails (unreachable), · no
// open task to poll; with the last error where errs, and why a push
// stream is down where reasons.
func (m *Model) viewServers(errs, reasons bool) string {
	parts := []string{m.styles.Dim.Render("servers")}
	for _, h := range m.health() {
		var s string
		bad := false
		// The header names the server; the error need not, and stays short
		// so that the other servers keep their room.
		h.lastErr = ansi.Truncate(strings.TrimPrefix(h.lastErr, "server "+h.name+" unreachable: "), maxHeaderErr, "…")
		switch {
		case h.open == 0:
			s = "· " + h.name
		case h.failing >= h.open:
			s, bad = fmt.Sprintf("✗ %s unreachable", h.name), true
		case h.failing > 0:
			s, bad = fmt.Sprintf("%s %s %d/%d polls failing", pollFailedSymbol, h.name, h.failing, h.open), true
		default:
			s = fmt.Sprintf("✓ %s %d open", h.name, h.open)
		}
		if bad && errs {
			s += ": " + h.lastErr
		}
		if p := h.pushText(reasons); p != "" {
			s += " · " + p
		}
		if h.behind > 0 {
			s += " · " + present.Count(h.behind, "poll") + " behind"
		}
		if h.name == m.list.server {
			s = "[" + s + "]"
		}
		if bad {
			s = m.styles.Error.Render(s)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "  ")
}

// detailServer is the detail pane's server (present.ServerDetail).
func (m *Model) detailServer(t *model.Task) string {
	return present.ServerDetail(t.Server, m.configured)
}

// serverNote is what the new call's server picker says of a server: its
// URL (redacted), or that it is a stdio child whose tasks die with
// taskdeck.
func serverNote(s deck.Server) string {
	if s.Stdio {
		return termtext.Line("stdio: " + s.Target + " (its tasks end when taskdeck quits)")
	}
	return termtext.Line(s.Target)
}

// pushText says how a server's open tasks are followed: pushed, polled,
// or some of each; and a push stream that is down (a server that offers
// none is simply polled).
func (h *serverHealth) pushText(reason bool) string {
	var parts []string
	switch {
	case h.open == 0:
	case h.pushed == h.open:
		parts = append(parts, "push")
	case h.pushed == 0:
		parts = append(parts, "poll")
	default:
		parts = append(parts, fmt.Sprintf("push %d/%d", h.pushed, h.open))
	}
	if h.push == deck.PushDown && h.open > 0 { // with nothing open, no stream is needed
		p := "push " + h.push
		if h.pushErr != "" && reason {
			p += ": " + h.pushErr
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, " · ")
}
