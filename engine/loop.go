package engine

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store"
)

// loop is the engine's run loop: it alone owns the schedule of due polls.
// Others hand it work through its inbox; each poll runs on its own
// goroutine and hands its outcome back.
type loop struct {
	e       *Engine
	sched   *model.Schedule
	inbox   chan func()
	results chan polled
	polls   sync.WaitGroup
	recon   *reconcile // nil once the start-up reconcile is over
	push    map[model.ServerRef]*serverPush
	dl      deadlineWatch
}

type polled struct {
	id  string
	res pollResult
	err error
}

// reconcile is the start-up reconcile in progress: the open tasks not yet
// polled once.
type reconcile struct {
	pending map[string]bool
	rep     deck.Reconcile
	last    time.Time // of the last progress event
}

// reconcileEvery throttles progress events to ten a second.
const reconcileEvery = 100 * time.Millisecond

// start runs the loop, once for the engine's lifetime (nil once closed).
func (e *Engine) start() *loop {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil
	}
	if e.loop == nil {
		e.loop = &loop{
			e:       e,
			sched:   model.NewSchedule(e.opts.PerServer),
			inbox:   make(chan func(), 64),
			results: make(chan polled, e.opts.PerServer),
			push:    map[model.ServerRef]*serverPush{},
		}
		e.ops.Add(1)
		go e.loop.run()
		e.own.run(e.loop)
		if e.opts.Retention {
			e.ops.Add(1)
			go e.runRetention()
		}
	}
	return e.loop
}

// running is the loop if it started.
func (e *Engine) running() *loop {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.loop
}

// send runs fn on the loop (not from the loop itself: it may wait for
// room in the inbox).
func (l *loop) send(fn func()) {
	select {
	case l.inbox <- fn:
	case <-l.e.ctx.Done():
	}
}

// due schedules a record's next poll if it has a task to poll and the
// loop runs; without a loop nothing is polled (the start polls it). soon:
// at once (something was just sent about it), else when its poll state
// says, or after the first interval.
func (e *Engine) due(rec *model.Task, soon bool) {
	l := e.running()
	if l == nil || !rec.Pollable() {
		return
	}
	if !e.own.schedules(rec) {
		return
	}
	at := time.Now()
	switch next := e.tracker.pollStatus(rec.ID).Next; {
	case soon:
	case !next.IsZero():
		at = next // a poll already said (a handle born ended was fetched)
	default:
		// The server said when to ask first; asking at once only costs it
		// a request that finds the task as it was handed out.
		at = at.Add(e.firstPoll(rec))
	}
	id, server, taskID := rec.ID, rec.Server, rec.TaskID
	l.send(func() { l.track(id, server, taskID, at) })
}

// firstPoll is the delay from a handle to its first poll: the server's
// pollIntervalMs (never under the floor), else the policy's default.
func (e *Engine) firstPoll(rec *model.Task) time.Duration {
	if hint := rec.ServerPollInterval(); hint > 0 {
		return max(hint, e.policy().Floor)
	}
	return e.policy().Default
}

func (e *Engine) policy() model.PollPolicy {
	if e.opts.Policy == (model.PollPolicy{}) {
		return model.DefaultPollPolicy
	}
	return e.opts.Policy
}

// polled files the outcome of a poll made outside the loop (Cancel's):
// the next poll follows from it, and its poll state is published.
func (e *Engine) polled(id string, res pollResult) {
	e.feeds.poll(e.entry(res.Task))
	l := e.running()
	if l == nil {
		return
	}
	l.send(func() {
		if res.Next == 0 {
			l.drop(id)
			return
		}
		l.sched.Set(id, res.Task.Server, time.Now().Add(res.Next))
	})
}

// PollNow implements deck.Deck. Given ids, it polls those open tasks at
// once, at most PerServer at a time, and returns when each is polled: a
// short command's refresh (get) sends those requests and no others, and
// the outcomes reach the feed and the schedule like any poll's. Given
// none, it starts the engine's watch and makes every open task due.
func (e *Engine) PollNow(ctx context.Context, ids []string) error {
	ctx, done, err := e.begin(ctx)
	if err != nil {
		return err
	}
	defer done()
	if len(ids) == 0 {
		// Watching everything (serve's start, the dashboard's)
		// also reconciles with the servers that list their tasks, aside:
		// a server slow to connect holds no poll back. Close waits for it
		// (e.ops).
		e.ops.Add(1)
		go func() {
			defer e.ops.Done()
			actx := deck.WithActor(e.ctx, e.actor(ctx))
			if _, err := e.reconcile(actx); err != nil {
				e.log.Warn("reconciling with tasks/list", "err", err)
			}
		}()
		l := e.start()
		if l == nil {
			return deck.Errorf(deck.KindFailed, "taskdeck is closed")
		}
		now := time.Now()
		l.send(func() { l.sched.AllDue(now) })
		return nil
	}
	whole := make([]string, len(ids))
	for i, id := range ids {
		if whole[i], err = e.wholeID(id); err != nil {
			return err
		}
	}
	if len(whole) == 1 {
		// On the caller's goroutine: one of its own would cost a wake-up
		// and a stack grown anew for every poll (target 2.1).
		return e.pollOne(ctx, whole[0]) // as it is: a *deck.Error, as resolve's are
	}
	slots := make(chan struct{}, e.opts.PerServer)
	errs := make([]error, len(whole))
	var wg sync.WaitGroup
	for i, id := range whole {
		wg.Add(1)
		slots <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			errs[i] = e.pollOne(ctx, id)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// pollOne is PollNow of the task whole id names.
func (e *Engine) pollOne(ctx context.Context, id string) error {
	// Its watcher polls a task watched elsewhere: one poller per task.
	res, err := e.tracker.PollUnless(ctx, id, e.own.elsewhere)
	switch {
	case errors.Is(err, store.ErrFenced):
		// Claimed by another meanwhile: its poll is the refresh.
		return nil
	case errors.Is(err, store.ErrNotFound):
		return notFound(id)
	case err != nil:
		return classify(err, id)
	case !res.Unasked:
		e.polled(id, res)
	}
	return nil
}

func (l *loop) run() {
	defer l.e.ops.Done()
	defer l.polls.Wait()
	ctx := l.e.ctx
	l.begin()
	timer := time.NewTimer(0)
	defer timer.Stop()
	health := l.e.health.Wake() // the store lost or back
	for {
		now := time.Now()
		wait := time.Hour
		// While the store is lost the schedule waits: a poll's result
		// could not be written.
		if !l.e.health.Lost() {
			for _, id := range l.sched.Take(now) {
				l.polls.Add(1)
				go l.poll(ctx, id)
			}
			if at, ok := l.sched.Wake(); ok {
				wait = max(at.Sub(now), 0)
			}
		}
		if at := l.subscribe(now); !at.IsZero() {
			wait = min(wait, max(at.Sub(now), 0))
		}
		if at := l.deadlines(now); !at.IsZero() {
			wait = min(wait, max(at.Sub(now), 0))
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case fn := <-l.inbox:
			fn()
		case p := <-l.results:
			l.done(p)
		case <-health:
		case <-l.e.deadlineWake:
			l.deadlineWoken()
		case <-timer.C:
		}
	}
}

func (l *loop) poll(ctx context.Context, id string) {
	defer l.polls.Done()
	var res pollResult
	err := store.ErrFenced
	if l.e.own.mayPoll(id) {
		res, err = l.e.tracker.Poll(ctx, id)
	}
	select {
	case l.results <- polled{id, res, err}:
	case <-ctx.Done():
	}
}

// done files a poll's outcome: the task's next poll, the feed's poll
// event, the reconcile's tally.
func (l *loop) done(p polled) {
	now := time.Now()
	switch {
	case errors.Is(p.err, store.ErrNotFound), errors.Is(p.err, store.ErrFenced):
		l.drop(p.id) // forgotten meanwhile, or another engine polls it now
	case p.err != nil && l.e.health.Lost():
		l.sched.Done(p.id, now) // polled again as soon as the store is back
	case p.err != nil:
		// The store failed, not the server: try again later.
		l.e.log.Warn("poll could not be recorded", "record", p.id, "err", p.err, l.e.opts.Tracer.LogAttr(p.id))
		l.sched.Done(p.id, now.Add(l.e.policy().Cap))
	case p.res.Next == 0:
		l.drop(p.id)
		l.e.feeds.poll(l.e.entry(p.res.Task))
	default:
		next := now.Add(p.res.Next)
		if l.pushedNow(p.res.Task.Server, p.id) { // the safety poll
			next = now.Add(max(p.res.Next, l.e.safety()))
			l.e.pushes.safe(p.id, next)
		}
		l.sched.Done(p.id, next)
		l.e.feeds.poll(l.e.entry(p.res.Task))
	}
	l.tally(p, now)
}

// begin starts the start-up reconcile: every open task is due at once,
// and the schedule bounds how many are polled at a time.
func (l *loop) begin() {
	r := &reconcile{pending: map[string]bool{}, rep: deck.Reconcile{Orphaned: l.e.orphans}}
	l.recon = r
	var open []model.Handle
	var err error
	if l.e.own.alone() { // on a shared database, the claim rounds schedule
		open, err = l.e.store.Handles(model.StatusWorking, model.StatusInputRequired)
	}
	if err != nil {
		l.e.log.Error("start-up reconcile could not read the open tasks", "err", err)
	}
	now := time.Now()
	l.sched.Grow(len(open))
	for _, t := range open {
		if t.Pollable() { // a call that needs input has nothing to poll
			l.track(t.ID, t.Server, t.TaskID, now)
			r.pending[t.ID] = true
		}
	}
	r.rep.Total = len(r.pending)
	l.progress(now)
}

// tally counts a task's first poll after start, as the tracker's report
// files it.
func (l *loop) tally(p polled, now time.Time) {
	r := l.recon
	if r == nil || !r.pending[p.id] {
		return
	}
	delete(r.pending, p.id)
	r.rep.Done++
	switch {
	case p.err != nil || p.res.Err != nil:
		r.rep.Unreachable++
	case p.res.Task.Status == model.StatusUnknown:
		r.rep.Unknown++
	case p.res.Task.Status.Terminal():
		r.rep.Finished++
	default:
		r.rep.Reattached++
	}
	l.progress(now)
}

// progress publishes the reconcile's progress, at most ten times a second,
// and always its end.
func (l *loop) progress(now time.Time) {
	r := l.recon
	over := len(r.pending) == 0
	if !over && now.Sub(r.last) < reconcileEvery {
		return
	}
	r.last = now
	rep := r.rep
	rep.Over = over
	l.e.feeds.reconciled(rep)
	if over {
		l.e.log.Info("reconcile: every open task checked", "tasks", rep.Total, "reattached", rep.Reattached, "finished", rep.Finished,
			"unknown", rep.Unknown, "orphaned", rep.Orphaned, "unreachable", rep.Unreachable)
		l.recon = nil
	}
}
