package engine

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	mcpconfig "github.com/taskdeck/taskdeck/mcpclient/config"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store"
)

// Deadlines on waits for input (issue 27). A wait's deadline is the one
// an operator set on it (SetDeadline, kept in the record), else its
// start plus its server's or tool's configured "deadline". At the
// deadline the engine that watches the task writes the escalation into
// the record: that write commits the deadline event to the outbox, and
// marks the wait as told, so that a restart or another engine of a fleet
// never tells it twice.

// Bounds of the deadline watch.
const (
	// deadlineRescan: on a fleet the waiting tasks are read again at
	// least this often, for what no commit of this process says (a claim
	// taken over). A deadline fires at most this late there. Alone, every
	// change comes through this process's commits (which wake the watch),
	// and a scan that found no deadline to come is not repeated: 10,000
	// waits were 10,000 records decoded every 30 s for nothing.
	deadlineRescan = 30 * time.Second
	// deadlineGap: commits wake the watch at most this often.
	deadlineGap = 100 * time.Millisecond
	// deadlineRetry: an escalation that failed (the store) is tried again
	// after this long.
	deadlineRetry = 5 * time.Second
)

var _ deck.Deadliner = (*Engine)(nil)

// deadlines is the config's deadlines of ref's waits (none for an ad-hoc
// URL).
func (e *Engine) deadlines(ref model.ServerRef) mcpconfig.Deadlines {
	if cfg := e.config(); cfg != nil && ref.Name != "" {
		return cfg.Servers[ref.Name].Deadlines
	}
	return mcpconfig.Deadlines{}
}

// answerDeadline is rec's current wait's deadline under the config in use.
func (e *Engine) answerDeadline(rec *model.Task) *model.WaitDeadline {
	return rec.AnswerDeadline(e.deadlines(rec.Server).For(rec.Tool))
}

// SetDeadline implements deck.Deadliner: the operator's deadline on the
// wait task id is in, replacing any other (one escalated too: the wait
// is told again at the new one). A zero at removes an operator's
// deadline not yet escalated; the config's then holds.
func (e *Engine) SetDeadline(ctx context.Context, id string, at time.Time) (*model.Task, error) {
	ctx, done, err := e.beginChange(ctx, "set a deadline")
	if err != nil {
		return nil, err
	}
	defer done()
	now := e.tracker.now()
	if !at.IsZero() && !at.After(now) {
		return nil, deck.Errorf(deck.KindUsage, "the deadline %s is in the past; give a later time or a duration such as 2h", at.UTC().Format(time.RFC3339))
	}
	rec, err := e.resolve(id)
	if err != nil {
		return nil, err
	}
	by := actorOf(ctx)
	defer e.tracker.tasks.lock(rec.ID)()
	rec, err = e.store.Update(rec.ID, func(r *model.Task) (bool, error) {
		if !r.WaitsForInput() {
			return false, &stateError{Task: r, Want: "it waits for no answer, and a deadline bounds a wait for input"}
		}
		since := r.WaitingSince()
		if at.IsZero() {
			// Only an operator's deadline not yet escalated goes: one
			// escalated stays the mark that this wait was told.
			if d := r.WaitDeadline; d == nil || !d.Wait.Equal(since) || d.By.IsZero() || !d.Escalated.IsZero() {
				return false, nil
			}
			r.WaitDeadline = nil
		} else {
			r.WaitDeadline = &model.WaitDeadline{At: at, Wait: since, By: by}
		}
		r.Act = &model.Act{Kind: model.ActDeadline, Actor: by}
		return true, nil
	})
	if err != nil {
		return rec, classify(err, id)
	}
	e.wakeDeadlines()
	return rec, nil
}

// wakeDeadlines has the deadline watch read the waiting tasks again.
func (e *Engine) wakeDeadlines() {
	select {
	case e.deadlineWake <- struct{}{}:
	default:
	}
}

// deadlinesHeard wakes the deadline watch for commits of waiting tasks
// (a wait begun, a deadline set). It runs in the commit hook.
func (e *Engine) deadlinesHeard(changes []change) {
	for _, c := range changes {
		if c.Task != nil && c.Task.Status == model.StatusInputRequired {
			e.wakeDeadlines()
			return
		}
	}
}

// The deadline watch is the loop's, not a goroutine of its own: the
// loop starts a scan (escalateDue, off the loop: it reads the waiting
// tasks and may answer or cancel) when one is due, and no goroutine
// waits between scans.
type deadlineWatch struct {
	at       time.Time // the next scan (zero: at once)
	scanned  time.Time // the last scan's start
	scanning bool
	idle     bool // no scan until woken
	woken    bool // woken during the scan under way: scan again after it
}

// deadlines starts the deadline scan if it is due, and returns when the
// next one is (zero: none while one runs, or until woken).
func (l *loop) deadlines(now time.Time) time.Time {
	d := &l.dl
	if d.scanning || d.idle {
		return time.Time{}
	}
	if now.Before(d.at) {
		return d.at
	}
	d.scanning, d.scanned = true, now
	l.polls.Add(1)
	go func() {
		defer l.polls.Done()
		next, ok := l.e.escalateDue()
		// The wait is measured on the tracker's clock, as the deadlines are.
		wait, rescan := deadlineRescan, !l.e.own.alone()
		if ok {
			wait, rescan = min(wait, max(next.Sub(l.e.tracker.now()), 0)), true
		}
		l.send(func() { l.deadlinesScanned(wait, rescan) })
	}()
	return time.Time{}
}

// deadlinesScanned schedules the next scan wait after the one that
// ended, or none until woken (rescan false).
func (l *loop) deadlinesScanned(wait time.Duration, rescan bool) {
	d := &l.dl
	d.scanning, d.idle = false, !rescan
	d.at = time.Now().Add(wait)
	if d.woken {
		d.woken = false
		l.deadlineWoken()
	}
}

// deadlineWoken brings the next scan forward to deadlineGap after the
// last one began: commits wake the watch at most that often.
func (l *loop) deadlineWoken() {
	d := &l.dl
	if d.scanning {
		d.woken = true
		return
	}
	if soon := d.scanned.Add(deadlineGap); d.idle || soon.Before(d.at) {
		d.at, d.idle = soon, false
	}
}

// escalateDue escalates the waits this engine watches whose deadline has
// come, and returns when the next one comes (ok false: none).
func (e *Engine) escalateDue() (next time.Time, ok bool) {
	if e.health.Lost() {
		return e.tracker.now().Add(deadlineRetry), true
	}
	recs, err := e.store.ByStatus(model.StatusInputRequired)
	if err != nil {
		e.log.Warn("deadlines: the waiting tasks could not be read", "err", err)
		return e.tracker.now().Add(deadlineRetry), true
	}
	soonest := func(at time.Time) {
		if !ok || at.Before(next) {
			next, ok = at, true
		}
	}
	for _, rec := range recs {
		d := e.answerDeadline(rec)
		if d == nil || !d.Escalated.IsZero() || (rec.Pollable() && !e.own.mayPoll(rec.ID)) {
			continue // none, told, or another engine watches it
		}
		if now := e.tracker.now(); d.At.After(now) {
			soonest(d.At)
			continue
		}
		if err := e.escalate(rec.ID); err != nil {
			if !errors.Is(err, store.ErrFenced) && !errors.Is(err, store.ErrNotFound) {
				e.log.Warn("deadlines: a wait's escalation could not be recorded", "record", rec.ID, "err", err)
				soonest(e.tracker.now().Add(deadlineRetry))
			}
		}
	}
	return next, ok
}

// escalate records that task id's wait ran past its deadline, as the
// engine's act (the deadline event goes out with the write), then does
// what the server's "onDeadline" asks.
func (e *Engine) escalate(id string) error {
	var on string
	var told *model.Task
	write := func(r *model.Task) (bool, error) {
		told = nil
		now := e.tracker.now()
		dl := e.deadlines(r.Server)
		d := r.AnswerDeadline(dl.For(r.Tool))
		if d == nil || !d.Escalated.IsZero() || d.At.After(now) {
			return false, nil // answered, told or moved meanwhile
		}
		on = dl.On
		d.Escalated, d.Outcome = now, outcomes[on]
		r.WaitDeadline = d
		r.Act = &model.Act{Kind: model.ActEscalate, Actor: e.tracker.engine}
		told = r
		return true, nil
	}
	unlock := e.tracker.tasks.lock(id)
	_, err := e.own.write(id, write)
	unlock()
	if err != nil || told == nil {
		return err
	}
	e.log.Info("a wait for input ran past its deadline", "record", id, "deadline", told.WaitDeadline.At, "then", on)
	ctx := deck.WithActor(e.ctx, e.tracker.engine)
	switch on {
	case mcpconfig.OnDeadlineDecline:
		answers := declines(told)
		if len(answers) == 0 {
			return nil
		}
		if _, err := e.Answer(ctx, id, answers); err != nil {
			e.log.Warn("deadlines: declining the unanswered input failed", "record", id, "err", err)
		}
	case mcpconfig.OnDeadlineCancel:
		if _, err := e.Cancel(ctx, id); err != nil {
			e.log.Warn("deadlines: cancelling the task failed", "record", id, "err", err)
		}
	}
	return nil
}

// outcomes say what the engine does at a deadline besides telling, by
// "onDeadline".
var outcomes = map[string]string{
	mcpconfig.OnDeadlineDecline: "declined the unanswered input at the deadline (onDeadline: decline)",
	mcpconfig.OnDeadlineCancel:  "cancelled the task at the deadline (onDeadline: cancel)",
}

// declines answers each unanswered elicitation of rec with a decline;
// other requests (sampling) have no decline and stay unanswered.
func declines(rec *model.Task) map[string]json.RawMessage {
	out := map[string]json.RawMessage{}
	for _, k := range rec.PendingInputs() {
		if rec.InputRequests[k].Method == "elicitation/create" {
			out[k] = json.RawMessage(`{"action":"decline"}`)
		}
	}
	return out
}
