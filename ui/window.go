package ui

import (
	"context"

	tea "charm.land/bubbletea/v2"
	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/model"
)

// The dashboard holds a window of the store: every open task and the
// newest finished ones, with the store's counts per status. It watches
// with a snapshot of one page of finished tasks (it opens in the time it
// takes to read the open ones, however many finished ones the store
// keeps), then reads older pages: in the background up to Options.Recent,
// and beyond as the cursor reaches the last row (scrolling, G, a search
// or a group that shows fewer rows than the store holds). The finished
// tasks held are always the newest ones: each page is the next older.

// pageSize is how many finished tasks one read brings.
const pageSize = 1000

// pager reads the pages of finished tasks older than those held.
type pager struct {
	// before is the oldest finished task held: the next page is older.
	before string
	gen    int  // numbers the snapshots: a page read before one is dropped
	busy   bool // a page is being read
	end    bool // the last read found no more
	// deleted are the ids the feed deleted while a page was read: the
	// page may still hold them.
	deleted map[string]bool
}

// pageMsg is one page of finished tasks, read after before.
type pageMsg struct {
	gen     int
	entries []deck.Entry
	err     error
}

func readPage(ctx context.Context, d deck.Deck, before string, gen int) tea.Cmd {
	return func() tea.Msg {
		entries, err := d.List(ctx, deck.Filter{Groups: []string{"finished"}, Before: before, Limit: pageSize})
		return pageMsg{gen: gen, entries: entries, err: err}
	}
}

// resetWindow reads pages again from after oldest, the oldest finished
// task a snapshot brought.
func (m *Model) resetWindow(oldest string) {
	m.pages = pager{gen: m.pages.gen + 1, before: oldest}
	m.sumHidden()
}

// setCounts takes the store's counts per status: what the list does not
// hold of each is in the store's older pages.
func (m *Model) setCounts(counts map[model.Status]int) {
	clear(m.list.extra)
	for st, n := range counts {
		if st.Terminal() {
			m.list.extra[st] = max(n-m.list.counts[st], 0)
		}
	}
}

// sumHidden is the finished tasks the store holds beyond the window.
func (m *Model) sumHidden() {
	m.hidden = 0
	for _, n := range m.list.extra {
		m.hidden += n
	}
}

// unheld accounts for a task of the store's older pages that a change
// brings into the list or deletes: its status, where the feed says it
// (else the first status with tasks left out), holds one fewer.
func (m *Model) unheld(prev model.Status) {
	if !prev.Terminal() {
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
// is on the last row.
func (m *Model) nextPage() tea.Cmd {
	p := &m.pages
	if !m.loaded || m.hidden == 0 || p.busy || p.end || m.deck == nil {
		return nil
	}
	held := 0
	for st, n := range m.list.counts {
		if st.Terminal() {
			held += n
		}
	}
	if held >= m.opts.Recent && m.cursor < len(m.list.visible)-1 {
		return nil
	}
	p.busy, p.deleted = true, map[string]bool{}
	return readPage(m.ctx, m.deck, p.before, p.gen)
}

// onPage puts a page of older finished tasks in the list.
func (m *Model) onPage(msg pageMsg) tea.Cmd {
	p := &m.pages
	if msg.gen != p.gen {
		return nil // a snapshot came meanwhile
	}
	p.busy = false
	if msg.err != nil {
		p.end = true // until the next snapshot: no retry loop
		return m.fail(msg.err)
	}
	if len(msg.entries) < pageSize {
		p.end = true
	}
	var add []*model.Task
	for _, e := range msg.entries {
		t := e.Task
		p.before = t.ID // the page is newest first
		if _, held := m.list.Get(t.ID); held || p.deleted[t.ID] {
			continue
		}
		add = append(add, t)
		m.unheld(t.Status)
	}
	p.deleted = nil
	if len(add) == 0 {
		p.end = true // an owner that ignores the cursor would send this page forever
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
