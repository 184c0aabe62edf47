package engine

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/mcpclient"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store"
	"github.com/taskdeck/taskdeck/termtext"
)

// Push (issue 13). The loop keeps, per server, up to pushStreamsPerServer
// listen streams of up to pushIDsPerStream open tasks each. A pushed state
// is applied as a poll's answer (tracker.Pushed); a task the server pushes
// is still polled, but only every safety interval; every other task
// (refused, not acknowledged, beyond the streams' room, or on a stream
// that is down) is polled as before.
const (
	// A re-subscribe waits for a lull of pushBatch in the joins, or
	// pushBatchMax after the first, and replaces a stream up at most once
	// per pushBatchMax: 2,000 calls in a burst make a few listens (each
	// re-sends every id of its stream), not 2,000. The tasks that wait are
	// polled.
	pushBatch    = 100 * time.Millisecond
	pushBatchMax = time.Second
	// pushIDsPerStream bounds the ids one listen asks for: a server sends
	// each one's state as the stream opens, and a re-subscribe re-sends
	// them all, so a join costs at most this many, and a server that
	// bounds what it queues for a subscriber is not asked for thousands.
	pushIDsPerStream = 500
	// pushStreamsPerServer bounds the streams (each one held HTTP
	// connection) to one server: past 4,000 open tasks there, the rest
	// are polled, and take a stream's place as its tasks end.
	pushStreamsPerServer = 8
	// pushRefusedRetry: a server that refused push is asked again about
	// this much later (servers rarely start pushing while they run).
	pushRefusedRetry = 10 * time.Minute
	// defaultSafetyFactor × the policy's cap is the safety poll of a
	// pushed task when Options.PushSafety is 0: 10 min by default, 6
	// requests per task-hour, against 120 for a task polled at the cap.
	defaultSafetyFactor = 20
)

// serverPush is the loop's push state of one server.
type serverPush struct {
	shards []*shard          // at most pushStreamsPerServer
	of     map[string]*shard // the open tasks watched there, by record id: the shard that has it
	over   map[string]string // open tasks no shard had room for (polled): record id -> task id
}

// shard is one stream's share of a server's open tasks.
type shard struct {
	open     map[string]string // record id -> task id, at most pushIDsPerStream
	sub      *stream           // the stream up now, nil if none
	starting *stream           // a listen not answered yet
	joinedAt time.Time         // the first task joined after the last listen went out (zero: none)
	lastJoin time.Time         // the last one
	retryAt  time.Time         // no listen before
	backoff  time.Duration     // after a failure, doubled to the policy's cap
	state    string            // its push state (deck.PushUp …), "" before any listen
	why      string            // why it is down or not offered
}

// join adds an open task to the shard; it is asked for at the next listen.
func (sh *shard) join(id, taskID string, now time.Time) {
	sh.open[id] = taskID
	sh.lastJoin = now
	if sh.joinedAt.IsZero() {
		sh.joinedAt = now
	}
}

// pushLimits are the bounds on a server's streams: pushIDsPerStream and
// pushStreamsPerServer, which a test may make small.
type pushLimits struct{ ids, streams int }

// room is the shard that takes the next open task: the first with room,
// else a new one while there may be more; nil when all are full.
func (sp *serverPush) room(lim pushLimits) *shard {
	for _, sh := range sp.shards {
		if len(sh.open) < lim.ids {
			return sh
		}
	}
	if len(sp.shards) == lim.streams {
		return nil
	}
	sh := &shard{open: map[string]string{}}
	sp.shards = append(sp.shards, sh)
	return sh
}

// pushRank orders push states: a server shows its worst shard's.
var pushRank = map[string]int{deck.PushUp: 1, deck.PushNotOffered: 2, deck.PushDown: 3}

// state is the server's push state: down if a stream is, else not
// offered if one was refused, else up ("" before any listen).
func (sp *serverPush) state() (state, why string) {
	for _, sh := range sp.shards {
		if pushRank[sh.state] > pushRank[state] {
			state, why = sh.state, sh.why
		}
	}
	return state, why
}

// stream is one listen: the tasks it asked for and, once up, those the
// server agreed to push.
type stream struct {
	server model.ServerRef
	shard  *shard
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
func (st *stream) apply(tr *tracker, p mcpclient.Pushed) (polled, bool) {
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

func (e *Engine) pushLimits() pushLimits {
	if e.opts.pushLimits != (pushLimits{}) {
		return e.opts.pushLimits
	}
	return pushLimits{pushIDsPerStream, pushStreamsPerServer}
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
		sp = &serverPush{of: map[string]*shard{}, over: map[string]string{}}
		l.push[ref] = sp
	}
	return sp
}

// show publishes the server's push state and the tasks it no longer (off)
// and now (on) pushes.
func (l *loop) show(ref model.ServerRef, sp *serverPush, off, on map[string]bool) {
	state, why := sp.state()
	l.e.pushes.set(ref, state, why, off, on)
}

// track schedules an open task's poll at at and watches it for push.
func (l *loop) track(id string, server model.ServerRef, taskID string, at time.Time) {
	l.sched.Set(id, server, at)
	sp := l.server(server)
	if sp.of[id] != nil || sp.over[id] != "" {
		return
	}
	if sh := sp.room(l.e.pushLimits()); sh != nil {
		sh.join(id, taskID, time.Now())
		sp.of[id] = sh
	} else {
		sp.over[id] = taskID
	}
}

// drop ends a task's polls and its watch. A stream keeps pushing it until
// the next re-subscribe; what it pushes then is not applied (ignored for
// a task forgotten, a no-op for one ended). Leaving alone does not
// re-subscribe: a server stops pushing a task that ended by itself. The
// place it leaves goes to a task that had none.
func (l *loop) drop(id string) {
	l.sched.Remove(id)
	l.e.own.release(id)
	for ref, sp := range l.push {
		delete(sp.over, id)
		sh := sp.of[id]
		if sh == nil {
			continue
		}
		delete(sh.open, id)
		delete(sp.of, id)
		for next, taskID := range sp.over {
			delete(sp.over, next)
			sh.join(next, taskID, time.Now())
			sp.of[next] = sh
			break
		}
		if len(sh.open) == 0 && sh.state == deck.PushDown && sh.sub == nil {
			sh.state, sh.why = "", "" // nothing left to re-subscribe: not down
			l.show(ref, sp, nil, nil)
		}
	}
}

// pushedNow tells whether a stream up for server pushes task id.
func (l *loop) pushedNow(server model.ServerRef, id string) bool {
	sp := l.push[server]
	if sp == nil {
		return false
	}
	sh := sp.of[id]
	return sh != nil && sh.sub != nil && sh.sub.acked[id]
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
		for _, sh := range sp.shards {
			if at, ok := l.listenDue(ref, sp, sh, now); ok {
				l.startListen(ref, sh)
			} else if !at.IsZero() {
				later(at)
			}
		}
	}
	return wake
}

// listenDue tells whether a shard's listen should go out now, else when it
// will (zero: nothing to ask for).
func (l *loop) listenDue(ref model.ServerRef, sp *serverPush, sh *shard, now time.Time) (time.Time, bool) {
	switch {
	case len(sh.open) == 0:
		if sh.sub != nil { // nothing left to push: leave the server be
			l.closeStream(ref, sp, sh, "")
		}
		return time.Time{}, false
	case sh.starting != nil, sh.sub != nil && sh.joinedAt.IsZero():
		return time.Time{}, false
	case now.Before(sh.retryAt):
		return sh.retryAt, false
	case !sh.joinedAt.IsZero():
		at := sh.lastJoin.Add(pushBatch)
		if most := sh.joinedAt.Add(pushBatchMax); most.Before(at) {
			at = most
		}
		if sh.sub != nil {
			if spaced := sh.sub.upAt.Add(pushBatchMax); at.Before(spaced) {
				at = spaced
			}
		}
		if now.Before(at) {
			return at, false
		}
	}
	return time.Time{}, true
}

// startListen sends a shard's listen for its open tasks.
func (l *loop) startListen(ref model.ServerRef, sh *shard) {
	st := &stream{server: ref, shard: sh, ids: make(map[string]string, len(sh.open))}
	for id, taskID := range sh.open {
		st.ids[taskID] = id
	}
	ctx, cancel := context.WithCancel(l.e.ctx)
	st.cancel, st.live = cancel, make(chan struct{})
	sh.starting, sh.joinedAt = st, time.Time{}
	l.polls.Add(1)
	go l.listen(ctx, st)
}

// backoff is the next base wait after a listen of b failed: the policy's
// default, doubling to its cap.
func (l *loop) backoff(b time.Duration) time.Duration {
	return min(max(2*b, l.e.policy().Default), l.e.policy().Cap)
}

// jitter spreads a wait over [d/2, d], so that the streams of a server
// (and the engines of a fleet) that failed together do not come back
// together.
func jitter(d time.Duration) time.Duration {
	return d/2 + rand.N(d/2+1)
}

// pollSoon makes a task that is no longer pushed due at now, unless its
// poll is in flight (its outcome schedules the next as for any poll).
func (l *loop) pollSoon(server model.ServerRef, id string, now time.Time) {
	if _, inFlight, ok := l.sched.Due(id); ok && !inFlight {
		l.sched.Set(id, server, now)
	}
}

// closeStream ends a shard's stream up; its tasks are polled as before
// from now on.
func (l *loop) closeStream(ref model.ServerRef, sp *serverPush, sh *shard, why string) {
	st := sh.sub
	sh.sub = nil
	st.stop()
	sh.state, sh.why = deck.PushDown, why
	if len(sh.open) == 0 {
		sh.state, sh.why = "", ""
	}
	l.show(ref, sp, st.acked, nil)
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
		//lint:ignore SA2001 the lock is the wait: taking it waits out the apply that holds it
		st.prev.mu.Unlock()
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
	sp, sh := l.push[st.server], st.shard
	if sp == nil || sh.starting != st {
		st.cancel() // not ours any more
		return
	}
	sh.starting = nil
	now := time.Now()
	if err != nil {
		state := deck.PushDown
		if errors.Is(err, mcpclient.ErrNoPush) {
			state, sh.retryAt = deck.PushNotOffered, now.Add(jitter(pushRefusedRetry))
		} else {
			sh.backoff = l.backoff(sh.backoff)
			sh.retryAt = now.Add(jitter(sh.backoff))
		}
		level := slog.LevelDebug
		if sh.sub == nil { // an old stream still up keeps pushing its tasks
			why := termtext.OneLine(err.Error(), 300)
			if sh.state != state || sh.why != why {
				level = slog.LevelInfo // each new reason once, not every retry
			}
			sh.state, sh.why = state, why
			l.show(st.server, sp, nil, nil)
		} else {
			// but not those that joined for this listen: ask again at retryAt.
			sh.joinedAt, sh.lastJoin = now, now
		}
		l.e.log.Log(l.e.ctx, level, "push: no stream; its tasks are polled", "server", st.server.String(), "err", err)
		return
	}
	st.acked = make(map[string]bool)
	for _, taskID := range sub.Acknowledged() {
		st.acked[st.ids[taskID]] = true
	}
	var off map[string]bool
	if old := sh.sub; old != nil {
		old.stop() // once the new one is up: no change falls between
		off, st.prev = old.acked, old
		for id := range old.acked {
			if !st.acked[id] && sh.open[id] != "" { // no longer pushed: its safety poll is too late
				l.pollSoon(st.server, id, now)
			}
		}
	}
	sh.sub, st.upAt = st, now
	sh.state, sh.why = deck.PushUp, ""
	close(st.live)
	l.show(st.server, sp, off, st.acked)
}

// applied files a pushed state applied to its record, as a poll's
// outcome: the feed hears of it, and a task still open is next polled
// after the safety interval.
func (l *loop) applied(st *stream, p polled) {
	if l.push[st.server] == nil || st.shard.open[p.id] == "" {
		return // left the watch meanwhile (ended, forgotten)
	}
	now := time.Now()
	switch {
	case errors.Is(p.err, store.ErrNotFound), errors.Is(p.err, store.ErrFenced):
		l.drop(p.id) // forgotten meanwhile, or another engine watches it now
	case p.err != nil:
		l.e.log.Warn("push could not be recorded", "record", p.id, "err", p.err, l.e.opts.Tracer.LogAttr(p.id))
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
	sp, sh := l.push[st.server], st.shard
	if sp == nil || sh.sub != st {
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
		sh.backoff = 0
	}
	sh.backoff = l.backoff(sh.backoff)
	sh.retryAt = now.Add(jitter(sh.backoff))
	for id := range st.acked {
		if sh.open[id] != "" {
			l.pollSoon(st.server, id, now)
		}
	}
	l.closeStream(st.server, sp, sh, why)
	if l.e.opts.Observer != nil {
		l.e.opts.Observer.PushDropped(ServerLabel(st.server))
	}
	l.e.log.Info("push: stream ended; re-subscribing, its tasks polled meanwhile", "server", st.server.String(), "err", err)
}
