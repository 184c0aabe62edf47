package engine

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/mcpclient"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store"
	"github.com/taskdeck/taskdeck/store/postgres"
	"github.com/taskdeck/taskdeck/termtext"
)

// Push (issue 13). The loop keeps one listen stream per server for the
// open tasks it watches there. A pushed state is applied as a poll's
// answer (Tracker.Pushed); a task the server pushes is still polled, but
// only every safety interval; every other task is polled as before.
const (
	// A re-subscribe waits for a lull of pushBatch in the joins, or
	// pushBatchMax after the first, and replaces a stream up at most once
	// per pushBatchMax: 2,000 calls in a burst make a few listens (each
	// re-sends every id), not 2,000. The tasks that wait are polled.
	pushBatch    = 100 * time.Millisecond
	pushBatchMax = time.Second
	// pushRefusedRetry: a server that refused push is asked again this
	// much later (servers rarely start pushing while they run).
	pushRefusedRetry = 10 * time.Minute
	// defaultSafetyFactor × the policy's cap is the safety poll of a
	// pushed task when Options.PushSafety is 0: 10 min by default, 6
	// requests per task-hour, against 120 for a task polled at the cap.
	defaultSafetyFactor = 20
)

// serverPush is the loop's push state of one server.
type serverPush struct {
	open     map[string]string // the open tasks watched there: record id -> task id
	sub      *stream           // the stream up now, nil if none
	starting *stream           // a listen not answered yet
	joinedAt time.Time         // the first task joined after the last listen went out (zero: none)
	lastJoin time.Time         // the last one
	retryAt  time.Time         // no listen before
	backoff  time.Duration     // after a drop, doubled to the policy's cap
}

// stream is one listen: the tasks it asked for and, once up, those the
// server agreed to push.
type stream struct {
	server model.ServerRef
	ids    map[string]string // task id -> record id, as asked
	acked  map[string]bool   // record ids acknowledged
	cancel context.CancelFunc
	upAt   time.Time // when the loop took it up
	// live is closed once the loop took the stream up; prev is the
	// stream it replaced, stopped by then. The stream applies only once
	// prev's last apply is over: a replaced stream's late state must not
	// land after its successor's newer one.
	live chan struct{}
	prev *stream
	mu   sync.Mutex // held while one pushed state is applied
	over atomic.Bool
}

// stop ends the stream: it applies nothing more after the apply under
// way, if any. It does not wait (the loop calls it).
func (st *stream) stop() {
	st.over.Store(true)
	st.cancel()
}

// apply applies one pushed state unless the stream was stopped.
func (st *stream) apply(tr *Tracker, p mcpclient.Pushed) (polled, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.over.Load() {
		return polled{}, false
	}
	id := st.ids[p.TaskID] // the client passes only ids asked for
	res, err := tr.Pushed(id, *p.Snapshot)
	return polled{id, res, err}, true
}

// pushView is what frontends see of push, guarded for the readers of
// Get, List and Servers.
type pushView struct {
	mu      sync.Mutex
	pushed  map[string]bool        // record ids a stream up pushes
	safety  map[string]time.Time   // their safety polls, once set
	servers map[string]deck.Server // Push and PushError by server name
}

// of is whether a task is pushed, and when its safety poll is (zero: as
// the tracker says).
func (v *pushView) of(id string) (bool, time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.pushed[id], v.safety[id]
}

// safe records a pushed task's safety poll.
func (v *pushView) safe(id string, at time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.pushed[id] {
		v.safety[id] = at
	}
}

func (v *pushView) state(server string) deck.Server {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.servers[server]
}

// set records a server's push state and the tasks it no longer (off) and
// now (on) pushes.
func (v *pushView) set(server model.ServerRef, state, why string, off, on map[string]bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.pushed == nil {
		v.pushed, v.safety, v.servers = map[string]bool{}, map[string]time.Time{}, map[string]deck.Server{}
	}
	for id := range off {
		delete(v.pushed, id)
		delete(v.safety, id)
	}
	maps.Copy(v.pushed, on)
	v.servers[server.String()] = deck.Server{Push: state, PushError: why}
}

func (e *Engine) safety() time.Duration {
	if e.opts.PushSafety > 0 {
		return e.opts.PushSafety
	}
	return defaultSafetyFactor * e.policy().Cap
}

// server is the push state of ref, made on first use.
func (l *loop) server(ref model.ServerRef) *serverPush {
	sp := l.push[ref]
	if sp == nil {
		sp = &serverPush{open: map[string]string{}}
		l.push[ref] = sp
	}
	return sp
}

// track schedules an open task's poll at at and watches it for push.
func (l *loop) track(id string, server model.ServerRef, taskID string, at time.Time) {
	l.sched.Set(id, server, at)
	sp := l.server(server)
	if _, ok := sp.open[id]; !ok {
		sp.open[id] = taskID
		sp.lastJoin = time.Now()
		if sp.joinedAt.IsZero() {
			sp.joinedAt = sp.lastJoin
		}
	}
}

// drop ends a task's polls and its watch. A stream keeps pushing it until
// the next re-subscribe; what it pushes then is not applied (ignored for
// a task forgotten, a no-op for one ended). Leaving alone does not
// re-subscribe: a server stops pushing a task that ended by itself.
func (l *loop) drop(id string) {
	l.sched.Remove(id)
	if l.e.claims != nil {
		l.e.claims.release(id)
	}
	for _, sp := range l.push {
		delete(sp.open, id)
	}
}

// pushedNow tells whether the stream up for server pushes task id.
func (l *loop) pushedNow(server model.ServerRef, id string) bool {
	sp := l.push[server]
	return sp != nil && sp.sub != nil && sp.sub.acked[id] && sp.open[id] != ""
}

// subscribe starts the listens that are due, and returns when the next
// one will be (zero: none pending).
func (l *loop) subscribe(now time.Time) time.Time {
	var wake time.Time
	later := func(at time.Time) {
		if wake.IsZero() || at.Before(wake) {
			wake = at
		}
	}
	for ref, sp := range l.push {
		switch {
		case len(sp.open) == 0:
			if sp.sub != nil { // nothing left to push: leave the server be
				l.closeStream(ref, sp, "")
			}
			continue
		case sp.starting != nil, sp.sub != nil && sp.joinedAt.IsZero():
			continue
		case now.Before(sp.retryAt):
			later(sp.retryAt)
			continue
		case !sp.joinedAt.IsZero():
			at := sp.lastJoin.Add(pushBatch)
			if most := sp.joinedAt.Add(pushBatchMax); most.Before(at) {
				at = most
			}
			if sp.sub != nil {
				if spaced := sp.sub.upAt.Add(pushBatchMax); at.Before(spaced) {
					at = spaced
				}
			}
			if now.Before(at) {
				later(at)
				continue
			}
		}
		st := &stream{server: ref, ids: make(map[string]string, len(sp.open))}
		for id, taskID := range sp.open {
			st.ids[taskID] = id
		}
		ctx, cancel := context.WithCancel(l.e.ctx)
		st.cancel, st.live = cancel, make(chan struct{})
		sp.starting, sp.joinedAt = st, time.Time{}
		l.polls.Add(1)
		go l.listen(ctx, st)
	}
	return wake
}

// backoff is the wait before the next listen after one of b failed:
// the policy's default, doubling to its cap.
func (l *loop) backoff(b time.Duration) time.Duration {
	return min(max(2*b, l.e.policy().Default), l.e.policy().Cap)
}

// pollSoon makes a task that is no longer pushed due at now, unless its
// poll is in flight (its outcome schedules the next as for any poll).
func (l *loop) pollSoon(server model.ServerRef, id string, now time.Time) {
	if _, inFlight, ok := l.sched.Due(id); ok && !inFlight {
		l.sched.Set(id, server, now)
	}
}

// closeStream ends the stream up at ref; its tasks are polled as before
// from now on.
func (l *loop) closeStream(ref model.ServerRef, sp *serverPush, why string) {
	st := sp.sub
	sp.sub = nil
	st.stop()
	state := deck.PushDown
	if len(sp.open) == 0 {
		state = ""
	}
	l.e.pushes.set(ref, state, why, st.acked, nil)
}

// listen runs one stream on its own goroutine: the listen, then each
// pushed state applied in the order the server sent them.
func (l *loop) listen(ctx context.Context, st *stream) {
	defer l.polls.Done()
	defer st.cancel()
	sub, err := l.openStream(ctx, st)
	l.send(func() { l.listened(st, sub, err) })
	if err != nil {
		return
	}
	defer sub.Close()
	select {
	case <-st.live:
	case <-ctx.Done():
		return
	}
	if st.prev != nil { // wait out its apply under way
		st.prev.mu.Lock()
		st.prev.mu.Unlock() // (empty: the lock is the wait)
		st.prev = nil
	}
	for p := range sub.Events() {
		res, ok := st.apply(l.e.tracker, p)
		if !ok {
			return
		}
		l.send(func() { l.applied(st, res) })
	}
	err = sub.Err()
	l.send(func() { l.ended(st, err) })
}

func (l *loop) openStream(ctx context.Context, st *stream) (*mcpclient.Subscription, error) {
	cctx, cancel := context.WithTimeout(ctx, l.e.opts.RequestTimeout)
	sess, err := l.e.pool.Session(cctx, st.server)
	cancel()
	if err != nil {
		return nil, err
	}
	return sess.Listen(ctx, slices.Sorted(maps.Keys(st.ids)))
}

// listened files a listen's answer: the new stream replaces the old one,
// or the server is asked again later (much later if it refused).
func (l *loop) listened(st *stream, sub *mcpclient.Subscription, err error) {
	sp := l.push[st.server]
	if sp == nil || sp.starting != st {
		st.cancel() // not ours any more
		return
	}
	sp.starting = nil
	now := time.Now()
	if err != nil {
		state := deck.PushDown
		if errors.Is(err, mcpclient.ErrNoPush) {
			state, sp.retryAt = deck.PushNotOffered, now.Add(pushRefusedRetry)
		} else {
			sp.backoff = l.backoff(sp.backoff)
			sp.retryAt = now.Add(sp.backoff)
		}
		if sp.sub == nil { // an old stream still up keeps pushing its tasks
			l.e.pushes.set(st.server, state, termtext.OneLine(err.Error(), 300), nil, nil)
		} else {
			// but not those that joined for this listen: ask again at retryAt.
			sp.joinedAt, sp.lastJoin = now, now
		}
		l.e.log.Debug("push: no stream", "server", st.server.String(), "err", err)
		return
	}
	st.acked = make(map[string]bool)
	for _, taskID := range sub.Acknowledged() {
		st.acked[st.ids[taskID]] = true
	}
	var off map[string]bool
	if old := sp.sub; old != nil {
		old.stop() // once the new one is up: no change falls between
		off, st.prev = old.acked, old
		for id := range old.acked {
			if !st.acked[id] && sp.open[id] != "" { // no longer pushed: its safety poll is too late
				l.pollSoon(st.server, id, now)
			}
		}
	}
	sp.sub, st.upAt = st, now
	close(st.live)
	l.e.pushes.set(st.server, deck.PushUp, "", off, st.acked)
}

// applied files a pushed state applied to its record, as a poll's
// outcome: the feed hears of it, and a task still open is next polled
// after the safety interval.
func (l *loop) applied(st *stream, p polled) {
	sp := l.push[st.server]
	if sp == nil || sp.open[p.id] == "" {
		return // left the watch meanwhile (ended, forgotten)
	}
	now := time.Now()
	switch {
	case errors.Is(p.err, store.ErrNotFound), errors.Is(p.err, postgres.ErrClaimLost):
		l.drop(p.id) // forgotten meanwhile, or another engine watches it now
	case p.err != nil:
		l.e.log.Warn("push could not be recorded", "task", p.id, "err", p.err)
	case p.res.Next == 0:
		l.drop(p.id)
		l.e.feeds.poll(l.e.entry(p.res.Task))
	default:
		if l.pushedNow(st.server, p.id) {
			at := now.Add(max(p.res.Next, l.e.safety()))
			l.sched.Set(p.id, st.server, at)
			l.e.pushes.safe(p.id, at)
		}
		l.e.feeds.poll(l.e.entry(p.res.Task))
	}
	l.tally(p, now) // as good as a poll for the start-up reconcile
}

// ended files a stream's end: its tasks are polled at once (a change may
// have fallen in the gap) and the server is asked again after a backoff.
func (l *loop) ended(st *stream, err error) {
	sp := l.push[st.server]
	if sp == nil || sp.sub != st {
		return // replaced, or closed by the loop
	}
	now := time.Now()
	why := "the server ended the stream"
	if err != nil {
		why = termtext.OneLine(err.Error(), 300)
	}
	// The backoff starts over only after a stream that lasted: a server
	// that acknowledges and drops at once is not asked ever faster.
	if now.Sub(st.upAt) >= l.e.policy().Cap {
		sp.backoff = 0
	}
	sp.backoff = l.backoff(sp.backoff)
	sp.retryAt = now.Add(sp.backoff)
	for id := range st.acked {
		if sp.open[id] != "" {
			l.pollSoon(st.server, id, now)
		}
	}
	l.closeStream(st.server, sp, why)
	l.e.log.Debug("push: stream ended", "server", st.server.String(), "err", err)
}
