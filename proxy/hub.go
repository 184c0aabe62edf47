package proxy

import (
	"context"
	"log/slog"
	"sync"

	"github.com/taskdeck/taskdeck/deck"
)

// hub follows the Deck's feed for the proxy's waiters: a held call waits
// for its record to end, a tasks/get for the poll it asked for. One watch
// serves them all; a waiter is woken on every event about its record and
// reads the record again, so no event can slip between a read and a wait.
type hub struct {
	deck deck.Deck
	log  *slog.Logger

	mu      sync.Mutex
	ctx     context.Context
	cancel  context.CancelFunc
	running bool
	closed  bool
	waiters map[string]map[chan struct{}]struct{}
}

func newHub(d deck.Deck, log *slog.Logger) *hub {
	h := &hub{deck: d, log: log, waiters: map[string]map[chan struct{}]struct{}{}}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	return h
}

// wait registers a waiter for id and makes sure the feed is followed. The
// channel is signalled on each event about id, and when the feed ends.
func (h *hub) wait(id string) (<-chan struct{}, func(), error) {
	ch := make(chan struct{}, 1)
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.ensureLocked(); err != nil {
		return nil, nil, err
	}
	if h.waiters[id] == nil {
		h.waiters[id] = map[chan struct{}]struct{}{}
	}
	h.waiters[id][ch] = struct{}{}
	return ch, func() {
		h.mu.Lock()
		delete(h.waiters[id], ch)
		if len(h.waiters[id]) == 0 {
			delete(h.waiters, id)
		}
		h.mu.Unlock()
	}, nil
}

// ensure follows the feed again if it ended (the owner went and came
// back, say); a waiter calls it after each wake.
func (h *hub) ensure() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ensureLocked()
}

func (h *hub) ensureLocked() error {
	if h.closed {
		return deck.Errorf(deck.KindFailed, "the taskdeck proxy is closed")
	}
	if h.running {
		return nil
	}
	feed, err := h.deck.Watch(h.ctx, 0)
	if err != nil {
		return err
	}
	h.running = true
	go h.follow(feed)
	return nil
}

func (h *hub) follow(feed deck.Feed) {
	for ev := range feed.Events() {
		h.mu.Lock()
		for _, e := range ev.Entries {
			if e.Task != nil {
				h.signal(e.Task.ID)
			}
		}
		for _, id := range ev.Deleted {
			h.signal(id)
		}
		h.mu.Unlock()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := feed.Err(); err != nil && !h.closed {
		h.log.Warn("proxy: the feed ended", "err", err)
	}
	// Everyone reads again; the next waiter watches anew.
	h.running = false
	for id := range h.waiters {
		h.signal(id)
	}
}

// signal wakes id's waiters; h.mu is held.
func (h *hub) signal(id string) {
	for ch := range h.waiters[id] {
		select {
		case ch <- struct{}{}:
		default: // already woken, not yet read
		}
	}
}

func (h *hub) close() {
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
	h.cancel()
}
