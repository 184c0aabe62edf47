package proxy

import (
	"context"
	"log/slog"
	"sync"

	"github.com/taskdeck/taskdeck/deck"
)

// hub follows the Deck's feed for the proxy's waiters: a held call waits
// for its record to end. One watch serves them all; a waiter is woken on
// every event about its record and reads the record again, so no event
// can slip between a read and a wait.
type hub struct {
	deck deck.Deck
	log  *slog.Logger

	mu       sync.Mutex
	ctx      context.Context
	cancel   context.CancelFunc
	running  bool
	starting bool            // a Watch is under way, outside mu
	feed     *deck.Following // the last feed: a re-watch resumes from its Rev
	closed   bool
	waiters  map[string]map[chan struct{}]struct{}
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
	if h.waiters[id] == nil {
		h.waiters[id] = map[chan struct{}]struct{}{}
	}
	h.waiters[id][ch] = struct{}{}
	h.mu.Unlock()
	stop := func() {
		h.mu.Lock()
		delete(h.waiters[id], ch)
		if len(h.waiters[id]) == 0 {
			delete(h.waiters, id)
		}
		h.mu.Unlock()
	}
	if err := h.ensure(); err != nil {
		stop()
		return nil, nil, err
	}
	return ch, stop, nil
}

// ensure follows the feed again if it ended (the owner went and came
// back, say); a waiter calls it after each wake. The Watch is a call to
// the Deck (over the network for a remote one): it runs outside h.mu, and
// the waiters that come meanwhile rely on the one starting it.
func (h *hub) ensure() error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return errProxyClosed
	}
	if h.running || h.starting {
		h.mu.Unlock()
		return nil
	}
	h.starting = true
	from := h.from()
	h.mu.Unlock()

	watch := func(ctx context.Context, from uint64) (deck.Feed, error) {
		return h.deck.WatchWindow(ctx, from, deck.Window{})
	}
	// It does not resume itself: the next waiter does, and hears why not.
	feed, err := deck.Follow(h.ctx, from, watch, func(context.Context, error) bool { return false })

	h.mu.Lock()
	defer h.mu.Unlock()
	h.starting = false
	if err != nil {
		// Those who relied on this start try again (and hear the error).
		h.signalAll()
		return err
	}
	h.running, h.feed = true, feed
	go h.follow(feed)
	return nil
}

// follow wakes the waiters of each record the feed names. It resumes from
// the last revision seen, so only the first watch starts with a snapshot;
// a snapshot's entries are not read: every waiter reads its record again
// instead. So the snapshot is a window of the open records alone, not the
// whole store.
func (h *hub) follow(feed *deck.Following) {
	for ev := range feed.Events() {
		h.mu.Lock()
		if ev.Kind == deck.EventSnapshot {
			h.signalAll()
		} else {
			for _, e := range ev.Entries {
				if e.Task != nil {
					h.signal(e.Task.ID)
				}
			}
			for _, id := range ev.Deleted {
				h.signal(id)
			}
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
	h.signalAll()
}

// from is the revision a watch resumes from; h.mu is held.
func (h *hub) from() uint64 {
	if h.feed == nil {
		return 0
	}
	return h.feed.Rev()
}

// signalAll wakes every waiter; h.mu is held.
func (h *hub) signalAll() {
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

// errProxyClosed ends what waits on a hub that was closed: the proxy is
// stopping, and the tasks go on without it.
var errProxyClosed = deck.Errorf(deck.KindFailed, "the taskdeck proxy is closed")
