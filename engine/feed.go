package engine

import (
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/model"
)

// errFellBehind ends a feed whose watcher read too slowly: the engine
// never waits for a watcher. Watch again from the feed's last revision to
// resume.
var errFellBehind = errors.New("the watcher fell behind the feed")

// feedBuffer is how many events a watcher may leave unread before its
// feed is cut off: room for a start-up reconcile of thousands of tasks
// (a poll event each, a change each that moved) while a watcher draws.
// The room is taken as events wait, not up front: a watcher that keeps
// up holds a few events, not 8,192 (1 MiB each, which was most of the
// engine's memory per open task at 1,000 of them).
var feedBuffer = 8192

// hub fans the engine's events out to its feeds. It publishes without
// waiting: a watcher whose buffer is full is cut off.
type hub struct {
	e        *Engine
	mu       sync.Mutex
	rev      uint64          // the last revision committed
	recon    *deck.Reconcile // the last reconcile progress, for watchers that come later
	down     *deck.Store     // the store's loss while it lasts, for watchers that come meanwhile
	watchers map[*feed]struct{}
	closed   bool
}

func newHub(e *Engine) *hub {
	return &hub{e: e, watchers: map[*feed]struct{}{}}
}

// feed is one watcher's stream. Events published while its replay is
// read wait in in; run drops those the replay already covered.
type feed struct {
	h    *hub
	in   inbox
	out  chan deck.Event
	stop chan struct{} // closed when the hub cuts the feed off
	// cause is why the hub cut it off (set before stop is closed).
	cause error
	err   error  // why the feed ended, once out is closed
	last  uint64 // the last revision delivered
	// window: what its snapshot holds besides the open records (nil:
	// every record).
	window *deck.Window
}

func (f *feed) Events() <-chan deck.Event { return f.out }
func (f *feed) Err() error                { return f.err }

// committed publishes committed changes, in revision order. It runs in
// the store's commit hook: it must not wait.
func (h *hub) committed(changes []change) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range changes {
		ev := deck.Event{Kind: deck.EventChange, Rev: c.Rev, Prev: c.Prev}
		if c.Task == nil {
			ev.Deleted = []string{c.ID}
		} else {
			ev.Entries = []deck.Entry{h.e.entry(c.Task)}
		}
		h.rev = max(h.rev, c.Rev)
		h.publish(ev)
	}
}

// poll publishes a task's poll state.
func (h *hub) poll(entries ...deck.Entry) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.publish(deck.Event{Kind: deck.EventPoll, Rev: h.rev, Entries: entries})
}

// reconciled publishes the start-up reconcile's progress.
func (h *hub) reconciled(rep deck.Reconcile) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.recon = &rep
	h.publish(deck.Event{Kind: deck.EventReconcile, Rev: h.rev, Reconcile: &rep})
}

// storeChanged publishes that the store was lost or is back.
func (h *hub) storeChanged(st deck.Store) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.down = nil
	if !st.Up {
		h.down = &st
	}
	h.publish(deck.Event{Kind: deck.EventStore, Rev: h.rev, Store: &st})
}

// publish hands ev to every feed; the caller holds mu.
func (h *hub) publish(ev deck.Event) {
	for f := range h.watchers {
		if !f.in.put(ev) {
			h.cut(f, errFellBehind)
		}
	}
}

// inbox is a feed's queue of published events not yet delivered, at most
// feedBuffer: it grows as events wait and gives its room back once they
// are read.
type inbox struct {
	mu    sync.Mutex
	queue []deck.Event
	head  int           // the next event to read
	limit int           // feedBuffer as the feed subscribed
	ready chan struct{} // holds a token while the queue is not empty
}

func newInbox() inbox { return inbox{limit: feedBuffer, ready: make(chan struct{}, 1)} }

// put queues ev without waiting; false if limit events wait already.
func (q *inbox) put(ev deck.Event) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.queue)-q.head >= q.limit {
		return false
	}
	q.queue = append(q.queue, ev)
	select {
	case q.ready <- struct{}{}:
	default:
	}
	return true
}

// take reads the next event, if one waits; the token in ready stays while
// more wait.
func (q *inbox) take() (deck.Event, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.head == len(q.queue) {
		return deck.Event{}, false
	}
	ev := q.queue[q.head]
	q.queue[q.head] = deck.Event{} // its entries are the watcher's now
	q.head++
	if q.head == len(q.queue) {
		// Empty: a small array is kept for the next events, a large one
		// (a burst) given back.
		q.queue, q.head = q.queue[:0], 0
		if cap(q.queue) > inboxKeep {
			q.queue = nil
		}
	} else {
		select {
		case q.ready <- struct{}{}:
		default:
		}
	}
	return ev, true
}

// inboxKeep is the most room an empty inbox keeps.
const inboxKeep = 64

// cut ends a feed; the caller holds mu.
func (h *hub) cut(f *feed, cause error) {
	delete(h.watchers, f)
	f.cause = cause
	close(f.stop)
}

// subscribe adds a feed, and tells the reconcile's progress so far and
// the store's loss if it lasts: what follows in the feed is newer.
func (h *hub) subscribe() (*feed, *deck.Reconcile, *deck.Store, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, nil, nil, errClosed
	}
	f := &feed{h: h, in: newInbox(), out: make(chan deck.Event), stop: make(chan struct{})}
	h.watchers[f] = struct{}{}
	return f, h.recon, h.down, nil
}

func (h *hub) unsubscribe(f *feed) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.watchers, f)
}

// close ends every feed.
func (h *hub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for f := range h.watchers {
		h.cut(f, errClosed)
	}
}

var errClosed = &deck.Error{Kind: deck.KindOwnerGone, Message: "taskdeck closed; the feed ended"}

// Watch implements deck.Deck. The feed subscribes before it reads what it
// replays, and drops the live changes the replay already holds: nothing
// is missed, nothing comes twice. Every watcher gets the same records:
// they are read-only.
func (e *Engine) Watch(ctx context.Context, from uint64) (deck.Feed, error) {
	return e.watch(ctx, from, nil)
}

// WatchWindow implements deck.Deck: Watch, with a snapshot read from the
// store's indexes (the open records, a page of the newest finished ones,
// the counts), not from every record.
func (e *Engine) WatchWindow(ctx context.Context, from uint64, w deck.Window) (deck.Feed, error) {
	if w.Finished < 0 {
		return nil, deck.Errorf(deck.KindUsage, "a window of %d finished records: it takes 0 or more", w.Finished)
	}
	return e.watch(ctx, from, &w)
}

func (e *Engine) watch(ctx context.Context, from uint64, w *deck.Window) (deck.Feed, error) {
	_, done, err := e.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	f, recon, down, err := e.feeds.subscribe()
	if err != nil {
		return nil, err
	}
	f.window = w
	first, rest, covered, err := e.replay(from, w)
	switch {
	case err != nil && e.health.Lost():
		// The feed says so now, and replays once the store is back.
		f.last = from
		e.start()
		go f.runLater(ctx, from)
		return f, nil
	case err != nil:
		e.feeds.unsubscribe(f)
		return nil, classify(err, "")
	}
	// What the hub said before the feed subscribed follows the replay.
	then := &first
	if rest != nil {
		then = &rest.then
	}
	if down != nil {
		*then = append(*then, deck.Event{Kind: deck.EventStore, Rev: covered, Store: down})
	}
	if recon != nil {
		*then = append(*then, deck.Event{Kind: deck.EventReconcile, Rev: covered, Reconcile: recon})
	}
	e.start()
	go f.run(ctx, first, rest, covered)
	return f, nil
}

// runLater is the feed of a watcher that came while the store was lost:
// it hears the loss first, then nothing until the store is back, then the
// replay it could not read before, then what is live. The replay covers
// whatever was heard in between.
func (f *feed) runLater(ctx context.Context, from uint64) {
	defer close(f.out)
	defer f.h.unsubscribe(f)
	f.h.mu.Lock()
	down := f.h.down
	f.h.mu.Unlock()
	if down != nil && !f.deliver(ctx, deck.Event{Kind: deck.EventStore, Rev: from, Store: down}) {
		return
	}
	for {
		select {
		case <-f.in.ready:
			ev, ok := f.in.take()
			if !ok || ev.Kind != deck.EventStore {
				continue // the replay will hold it
			}
			if !f.deliver(ctx, ev) {
				return
			}
			if !ev.Store.Up {
				continue
			}
			first, rest, covered, err := f.h.e.replay(from, f.window)
			switch {
			case err != nil && f.h.e.health.Lost():
				continue // lost again: its return replays
			case err != nil:
				f.err = classify(err, "")
				return
			}
			f.stream(ctx, first, rest, covered)
			return
		case <-f.stop:
			f.ended()
			return
		case <-ctx.Done():
			return
		}
	}
}

// replay reads what a feed starts with: the changes after from, or a
// snapshot when from is 0 or older than what the store keeps. A snapshot
// is every record, or with a window its first part, the rest of it read
// as the watcher takes it (rest); a windowed replay ends with the counts
// as of its end.
func (e *Engine) replay(from uint64, w *deck.Window) ([]deck.Event, *snapshotRest, uint64, error) {
	e.own.refresh()
	if from > 0 {
		// The counts and the changes are two reads: a commit between them
		// is read again (and, should commits keep coming, a snapshot).
		for range 3 {
			var counts map[model.Status]int
			var countedAt uint64
			var err error
			if w != nil {
				if countedAt, counts, err = e.store.CountsAt(); err != nil {
					return nil, nil, 0, err
				}
			}
			changes, upTo, ok, err := e.changesSince(from)
			if err != nil {
				return nil, nil, 0, err
			}
			if !ok {
				break
			}
			if w != nil && countedAt != upTo {
				continue
			}
			var first []deck.Event
			for _, c := range changes {
				ev := deck.Event{Kind: deck.EventChange, Rev: c.Rev}
				if c.Task == nil {
					ev.Deleted = []string{c.ID}
				} else {
					ev.Entries = []deck.Entry{e.entry(c.Task)}
				}
				first = append(first, ev)
			}
			return append(first, deck.Event{Kind: deck.EventCaughtUp, Rev: upTo, Counts: counts}), nil, upTo, nil
		}
	}
	if w == nil {
		rev, tasks, err := e.store.Snapshot()
		if err != nil {
			return nil, nil, 0, err
		}
		first := []deck.Event{{Kind: deck.EventSnapshot, Rev: rev, Entries: e.entries(tasks)}}
		if from > 0 {
			first = append(first, deck.Event{Kind: deck.EventCaughtUp, Rev: rev})
		}
		return first, nil, rev, nil
	}
	snap, rest, err := e.windowStart(w.Finished)
	if err != nil {
		return nil, nil, 0, err
	}
	if from > 0 {
		rest.then = append(rest.then, deck.Event{Kind: deck.EventCaughtUp, Rev: snap.Rev})
	}
	return []deck.Event{snap}, rest, snap.Rev, nil
}

// snapshotPart is how many records one part of a windowed snapshot
// holds: its first event reaches a watcher through the socket in
// milliseconds, where 10,000 open tasks in one took a second to encode
// and decode.
const snapshotPart = 256

// The open and the finished statuses, for the store's pages.
var (
	openStatuses     = slices.DeleteFunc(slices.Clone(model.AllStatuses), model.Status.Terminal)
	finishedStatuses = slices.DeleteFunc(slices.Clone(model.AllStatuses), func(st model.Status) bool { return !st.Terminal() })
)

// snapshotRest is what a windowed snapshot sends after its first part:
// the open records older than those sent, read from the open statuses'
// index a part at a time as the watcher takes them (so that the first
// part costs the same however many records are open), then the window's
// finished records, then the events that follow the snapshot in the
// replay. It holds at most two parts of open records and the window.
type snapshotRest struct {
	rev      uint64
	ready    []deck.Entry // read, not yet sent
	before   string       // the oldest open record read; "" once every one is
	finished []deck.Entry // the window's, sent after the open records
	// unread is how many of the window's finished records are still to
	// read: they follow every open one, so the first part does not wait
	// for them (1,000 records decoded, most of its cost).
	unread int
	then   []deck.Event
}

// windowStart reads a windowed snapshot's first part: the store's counts
// and the newest open records, as of one revision (Rev). Counts, then the
// page, then the counts again: a commit between them reads again, and
// should commits keep coming, every open record and the window are read
// in one transaction instead. The later parts (the older open records,
// then the window's newest finished ones) are read after Rev: a part may
// hold a record as changed after it, and the change follows the snapshot
// as every change does.
func (e *Engine) windowStart(finished int) (deck.Event, *snapshotRest, error) {
	for range 3 {
		rev, counts, err := e.store.CountsAt()
		if err != nil {
			return deck.Event{}, nil, err
		}
		open, err := e.store.Page("", snapshotPart, openStatuses...)
		if err != nil {
			return deck.Event{}, nil, err
		}
		again, _, err := e.store.CountsAt()
		if err != nil {
			return deck.Event{}, nil, err
		}
		if again != rev {
			continue
		}
		rest := &snapshotRest{rev: rev, ready: e.entries(open), unread: finished}
		if len(open) == snapshotPart {
			rest.before = open[len(open)-1].ID
		}
		return e.firstPart(rest, counts)
	}
	win, err := e.store.Window(finished)
	if err != nil {
		return deck.Event{}, nil, err
	}
	return e.firstPart(&snapshotRest{rev: win.Rev, ready: e.entries(win.Open), finished: e.entries(win.Finished)}, win.Counts)
}

func (e *Engine) firstPart(rest *snapshotRest, counts map[model.Status]int) (deck.Event, *snapshotRest, error) {
	ev, err := rest.next(e)
	ev.Kind, ev.Counts = deck.EventSnapshot, counts
	return ev, rest, err
}

// next reads the next part; More says whether one follows it.
func (r *snapshotRest) next(e *Engine) (deck.Event, error) {
	for r.before != "" && len(r.ready) <= snapshotPart {
		open, err := e.store.Page(r.before, snapshotPart, openStatuses...)
		if err != nil {
			return deck.Event{}, err
		}
		r.ready = append(r.ready, e.entries(open)...)
		r.before = ""
		if len(open) == snapshotPart {
			r.before = open[len(open)-1].ID
		}
	}
	if r.before == "" && r.unread > 0 {
		done, err := e.store.Page("", r.unread, finishedStatuses...)
		if err != nil {
			return deck.Event{}, err
		}
		r.finished, r.unread = e.entries(done), 0
	}
	if r.before == "" && r.finished != nil {
		r.ready, r.finished = append(r.ready, r.finished...), nil
	}
	n := min(len(r.ready), snapshotPart)
	part := r.ready[:n:n] // a watcher may append to its part
	r.ready = r.ready[n:]
	return deck.Event{Kind: deck.EventSnapshotMore, Rev: r.rev, Entries: part, More: len(r.ready) > 0 || r.before != ""}, nil
}

func (e *Engine) entries(tasks []*model.Task) []deck.Entry {
	out := make([]deck.Entry, len(tasks))
	for i, t := range tasks {
		out[i] = e.entry(t)
	}
	return out
}

func (f *feed) run(ctx context.Context, first []deck.Event, rest *snapshotRest, covered uint64) {
	defer close(f.out)
	defer f.h.unsubscribe(f)
	f.stream(ctx, first, rest, covered)
}

// stream delivers the replay (the rest of its snapshot read as it goes),
// then what is live, until the feed ends. The live events wait in the
// inbox meanwhile, and those the replay covered are dropped.
func (f *feed) stream(ctx context.Context, first []deck.Event, rest *snapshotRest, covered uint64) {
	for _, ev := range first {
		if !f.deliver(ctx, ev) {
			return
		}
	}
	for more := rest != nil && first[0].More; more; {
		select {
		case <-f.stop:
			f.ended()
			return
		default:
		}
		ev, err := rest.next(f.h.e)
		if err != nil {
			f.err = classify(err, "")
			return
		}
		if !f.deliver(ctx, ev) {
			return
		}
		more = ev.More
	}
	if rest != nil {
		for _, ev := range rest.then {
			if !f.deliver(ctx, ev) {
				return
			}
		}
	}
	for {
		select {
		case <-f.in.ready:
			ev, ok := f.in.take()
			if !ok || ev.Kind == deck.EventChange && ev.Rev <= covered {
				continue // the replay holds it
			}
			if !f.deliver(ctx, ev) {
				return
			}
		case <-f.stop:
			f.ended()
			return
		case <-ctx.Done():
			return
		}
	}
}

// deliver hands one event to the watcher; events that commit nothing
// carry the last revision delivered, so revisions never go back.
func (f *feed) deliver(ctx context.Context, ev deck.Event) bool {
	if ev.Kind != deck.EventChange {
		ev.Rev = max(ev.Rev, f.last)
	}
	select {
	case f.out <- ev:
		f.last = ev.Rev
		return true
	case <-f.stop:
		f.ended()
		return false
	case <-ctx.Done():
		return false
	}
}

// ended sets why the hub cut the feed off.
func (f *feed) ended() {
	if errors.Is(f.cause, errFellBehind) {
		f.err = &deck.Error{Kind: deck.KindFellBehind, Err: errFellBehind,
			Message: "the watcher read the feed too slowly and was cut off; watch again from the last revision it received to resume"}
		return
	}
	f.err = f.cause
}
