package ui

import (
	"context"
	"sync"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/taskdeck/taskdeck/deck"
)

// frameEvery is the dashboard's frame: the feed's events are handed to
// Update at most once per frame, in one batch, so a burst of changes
// costs one sort of the table, not one per change.
const frameEvery = time.Second / 30

// The backoff between attempts to watch again after a feed ended.
const (
	rewatchFirst = 250 * time.Millisecond
	rewatchMax   = 10 * time.Second
)

// feedMsg is what the feed brought within one frame, in order; ended,
// when set, says that the feed ended and when it is watched again.
type feedMsg struct {
	events []deck.Event
	ended  *feedEnded
}

type feedEnded struct {
	err   error
	retry time.Duration
}

// watcher reads the deck's feed on its own goroutine, at once, so the
// engine never waits for the dashboard (it cuts off a slow watcher), and
// hands what it read to the dashboard one frame at a time. When a feed
// ends it says so and follows it again (deck.Follow) from the last
// revision it saw, with backoff: nothing is missed and nothing comes
// twice.
type watcher struct {
	ctx    context.Context
	deck   deck.Deck
	window deck.Window // what its snapshots hold (window.go)
	once   sync.Once

	mu      sync.Mutex
	pending []deck.Event
	ended   *feedEnded
	wake    chan struct{} // signalled when pending or ended is set
	last    time.Time     // when the last batch was handed over
	feed    *deck.Following
	backoff time.Duration // before the next watch, if the feed ends
}

func newWatcher(ctx context.Context, d deck.Deck, w deck.Window) *watcher {
	return &watcher{ctx: ctx, deck: d, window: w, wake: make(chan struct{}, 1), backoff: rewatchFirst}
}

// start reads the feed until ctx ends; it starts once.
func (w *watcher) start() { w.once.Do(func() { go w.run() }) }

func (w *watcher) run() {
	watch := func(ctx context.Context, from uint64) (deck.Feed, error) {
		return w.deck.WatchWindow(ctx, from, w.window)
	}
	for {
		feed, err := deck.Follow(w.ctx, w.from(), watch, w.rewatch)
		if err == nil {
			w.mu.Lock()
			w.feed = feed
			w.mu.Unlock()
			for ev := range feed.Events() {
				w.push(ev)
			}
			err = feed.Err()
		}
		if err == nil || !w.rewatch(w.ctx, err) {
			return
		}
	}
}

// rewatch says that the feed ended and waits its backoff before it is
// watched again; the backoff grows while no event comes between.
func (w *watcher) rewatch(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	if err == nil {
		err = errFeedClosed
	}
	w.mu.Lock()
	backoff := w.backoff
	w.ended = &feedEnded{err: err, retry: backoff}
	w.backoff = min(backoff*2, rewatchMax)
	w.mu.Unlock()
	w.signal()
	select {
	case <-ctx.Done():
		return false
	case <-time.After(backoff):
		return true
	}
}

var errFeedClosed = &deck.Error{Kind: deck.KindOwnerGone, Message: "the feed closed"}

// from is the revision a watch resumes from.
func (w *watcher) from() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.feed == nil {
		return 0
	}
	return w.feed.Rev()
}

func (w *watcher) push(ev deck.Event) {
	w.mu.Lock()
	w.pending = append(w.pending, ev)
	w.backoff = rewatchFirst
	w.mu.Unlock()
	w.signal()
}

func (w *watcher) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// next waits for the next batch: what arrived until the frame after the
// last one handed over. The first change after a quiet spell goes at once.
func (w *watcher) next() tea.Cmd {
	return func() tea.Msg {
		select {
		case <-w.ctx.Done():
			return nil
		case <-w.wake:
		}
		w.mu.Lock()
		wait := time.Until(w.last.Add(frameEvery))
		w.mu.Unlock()
		if wait > 0 {
			select {
			case <-w.ctx.Done():
				return nil
			case <-time.After(wait):
			}
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		msg := feedMsg{events: w.pending, ended: w.ended}
		w.pending, w.ended, w.last = nil, nil, time.Now()
		select { // what arrived meanwhile is in this batch
		case <-w.wake:
		default:
		}
		return msg
	}
}
