package ui

import (
	"context"
	"slices"

	tea "charm.land/bubbletea/v2"
	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/model"
)

// The dashboard holds a window of the store: every open task and the
// newest finished ones, with the store's counts per status. It watches
// with a snapshot of one page of finished tasks (it opens in the time it
// takes to read the open ones, however many finished ones the store
// keeps), then reads older pages: in the background up to Options.Recent,
// and beyond as the cursor reaches the last row (scrolling, G). The
// window's finished tasks are always the newest ones: each page is the
// next older. A group, a status filter or a search that reaches its last
// row reads instead pages of the finished statuses it can show, from
// their index, and keeps only the tasks it shows (viewPager).

// pageSize is how many finished tasks one read brings.
const pageSize = 1000

// pager reads the pages of finished tasks older than those held.
type pager struct {
	// before is the oldest finished task of the window: every finished
	// task newer is held, and the next window page is older.
	before string
	gen    int  // numbers the snapshots: a page read before one is dropped
	busy   bool // a page is being read
	end    bool // the last read found no more
	// deleted are the ids the feed deleted while a page was read: the
	// page may still hold them.
	deleted map[string]bool
	view    viewPager
}

// viewPager reads, for a view that shows only some finished tasks (a
// group, a status filter, a search), pages of the statuses it can show
// (a status filter's, a group's, a search's status: terms) from their
// index, older than the window, and keeps only the tasks the view shows:
// it never reads the other statuses, and holds none of what it skips.
type viewPager struct {
	statuses []model.Status
	query    string // the search it read for: another one reads again
	before   string // the oldest task of its statuses read
	end      bool
}

// pageMsg is one page of finished tasks, read after before: the window's,
// or of view's statuses when view is set.
type pageMsg struct {
	gen     int
	view    []model.Status
	query   string
	entries []deck.Entry
	err     error
}

func readPage(ctx context.Context, d deck.Deck, before string, gen int) tea.Cmd {
	return func() tea.Msg {
		entries, err := d.List(ctx, deck.Filter{Groups: []string{"finished"}, Before: before, Limit: pageSize})
		return pageMsg{gen: gen, entries: entries, err: err}
	}
}

// readViewPage reads a page of some finished statuses, from their index.
func readViewPage(ctx context.Context, d deck.Deck, v viewPager, gen int) tea.Cmd {
	return func() tea.Msg {
		entries, err := d.List(ctx, deck.Filter{Statuses: v.statuses, Before: v.before, Limit: pageSize})
		return pageMsg{gen: gen, view: v.statuses, query: v.query, entries: entries, err: err}
	}
}

// resetWindow reads pages again from after oldest, the oldest finished
// task a snapshot brought.
func (m *Model) resetWindow(oldest string) {
	m.pages = pager{gen: m.pages.gen + 1, before: oldest}
	m.sumHidden()
}

// filling is a windowed snapshot whose first part is in and whose other
// parts (the older open tasks, then the window's finished ones) still
// come: the count line shows the store's counts meanwhile, and what reads
// beyond the window (the pager) or acts on every task shown (mark all)
// waits for the last part.
type filling struct {
	counts map[model.Status]int // the snapshot's, of the whole store
	parts  int                  // the parts in so far, the first one included
}

// loadPart puts a snapshot's next part in the table; the last one ends
// the filling.
func (m *Model) loadPart(ev deck.Event) {
	fill := m.filling
	if fill == nil {
		return // a part of a snapshot whose first part was not seen
	}
	tasks := make([]*model.Task, 0, len(ev.Entries))
	for _, e := range ev.Entries {
		t := e.Task
		tasks = append(tasks, t)
		if t.Status.Terminal() {
			m.pages.before = olderID(m.pages.before, t.ID)
		} else {
			m.setPoll(t, e.Poll)
		}
	}
	m.list.Apply(tasks, nil)
	fill.parts++
	if !ev.More {
		m.filling = nil
		m.snapshotIn()
	}
	m.setCounts(fill.counts)
	m.refreshHealth()
}

// setCounts takes the store's counts per status: what the list does not
// hold of each is in the store's older pages, or while the snapshot
// fills, of the open ones in its parts to come.
func (m *Model) setCounts(counts map[model.Status]int) {
	clear(m.list.extra)
	for st, n := range counts {
		if st.Terminal() || m.filling != nil {
			m.list.extra[st] = max(n-m.list.counts[st], 0)
		}
	}
}

// sumHidden is the finished tasks the store holds beyond the window.
func (m *Model) sumHidden() {
	m.hidden = 0
	for st, n := range m.list.extra {
		if st.Terminal() {
			m.hidden += n
		}
	}
}

// storedAll is every task of the store: those held, the finished ones
// beyond the window and, while the snapshot fills, the open ones to come.
func (m *Model) storedAll() int {
	n := m.list.Len()
	for _, extra := range m.list.extra {
		n += extra
	}
	return n
}

// unheld accounts for a task of the store's older pages that a change
// brings into the list or deletes: its status, where the feed says it
// (else the first status with tasks left out), holds one fewer. An open
// one (a task the snapshot's parts had not reached yet) is not in them.
func (m *Model) unheld(prev model.Status) {
	if prev != "" && !prev.Terminal() {
		return
	}
	if prev == "" {
		prev = ""
		for _, st := range model.AllStatuses {
			if m.list.extra[st] > 0 {
				prev = st
				break
			}
		}
	}
	if m.list.extra[prev] > 0 {
		m.list.extra[prev]--
	}
}

// nextPage reads the next older page when the store holds finished tasks
// beyond the window and fewer than Options.Recent are held, or the cursor
// is on the last row: a window page when the view shows every finished
// task, else a page of the finished statuses the view can show, of which
// it keeps what the view shows (none when it shows no finished status, or
// the store holds none of them beyond what is held).
func (m *Model) nextPage() tea.Cmd {
	p := &m.pages
	if !m.loaded || m.filling != nil || m.hidden == 0 || p.busy || m.deck == nil {
		return nil
	}
	held := 0
	for st, n := range m.list.counts {
		if st.Terminal() {
			held += n
		}
	}
	if held < m.opts.Recent && !p.end {
		return m.readWindow()
	}
	if m.cursor < len(m.list.visible)-1 {
		return nil
	}
	sts := m.list.viewFinished()
	left := 0
	for _, st := range sts {
		left += m.list.extra[st]
	}
	switch {
	case left == 0:
		return nil
	case m.list.showsEveryFinished(sts):
		if p.end {
			return nil
		}
		return m.readWindow()
	}
	query := m.filter.Value()
	if !slices.Equal(p.view.statuses, sts) || p.view.query != query {
		p.view = viewPager{statuses: sts, query: query, before: p.before}
	}
	if p.view.end {
		return nil
	}
	// What the window holds of these statuses needs no reading again.
	p.view.before = olderID(p.view.before, p.before)
	p.busy, p.deleted = true, map[string]bool{}
	return readViewPage(m.ctx, m.deck, p.view, p.gen)
}

func (m *Model) readWindow() tea.Cmd {
	p := &m.pages
	p.busy, p.deleted = true, map[string]bool{}
	return readPage(m.ctx, m.deck, p.before, p.gen)
}

// terminal are the finished statuses.
var terminal = slices.DeleteFunc(slices.Clone(model.AllStatuses), func(st model.Status) bool { return !st.Terminal() })

// olderID is the older of two cursors, "" being before the newest task.
func olderID(a, b string) string {
	if a == "" || b == "" {
		return a + b
	}
	return min(a, b)
}

// viewFinished are the finished statuses the view can show: those the
// group, the status filter and the search's status terms leave.
func (l *taskList) viewFinished() []model.Status {
	var out []model.Status
	for _, st := range terminal {
		switch {
		case l.status != "" && st != l.status,
			l.group != nil && !slices.Contains(l.group.Statuses, st),
			len(l.memo[statusMemo].q) > 0 && !l.memo[statusMemo].q.MatchValue(string(st)):
			continue
		}
		out = append(out, st)
	}
	return out
}

// showsEveryFinished reports whether the view, whose finished statuses
// are sts, shows every finished task: a window page is then all shown,
// else a view page is read and only what it shows is kept.
func (l *taskList) showsEveryFinished(sts []model.Status) bool {
	return len(sts) == len(terminal) && len(l.query) == 0 && l.server == "" && l.agent == ""
}

// onPage puts a page of older finished tasks in the list: a window page
// whole, a view page's tasks that the view shows.
func (m *Model) onPage(msg pageMsg) tea.Cmd {
	p := &m.pages
	if msg.gen != p.gen {
		return nil // a snapshot came meanwhile
	}
	p.busy = false
	view := msg.view != nil
	if view && (!slices.Equal(msg.view, p.view.statuses) || msg.query != p.view.query) {
		p.deleted = nil
		return m.nextPage() // the view changed meanwhile: read for the new one
	}
	end := &p.end
	cursor := &p.before
	if view {
		end, cursor = &p.view.end, &p.view.before
	}
	if msg.err != nil {
		*end = true // until the next snapshot or view: no retry loop
		return m.fail(msg.err)
	}
	if len(msg.entries) < pageSize {
		*end = true
	}
	var add []*model.Task
	moved := false
	for _, e := range msg.entries {
		t := e.Task
		if *cursor == "" || t.ID < *cursor { // the page is newest first
			*cursor, moved = t.ID, true
		}
		if _, held := m.list.Get(t.ID); held || p.deleted[t.ID] || view && !m.list.admits(t) {
			continue
		}
		add = append(add, t)
		m.unheld(t.Status)
	}
	p.deleted = nil
	if !moved {
		*end = true // an owner that ignores the cursor would send this page forever
	}
	selected, line := m.selectedID(), m.cursor-m.top
	m.list.Apply(add, nil)
	if i := m.list.IndexOf(selected); selected != "" && i >= 0 {
		m.cursor, m.top = i, i-line
	}
	m.clampCursor()
	m.sumHidden()
	return m.nextPage()
}
