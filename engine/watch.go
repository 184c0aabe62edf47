package engine

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/taskdeck/taskdeck/mcpclient"
	"github.com/taskdeck/taskdeck/model"
)

// Report is what start-up reconciliation found.
type Report struct {
	Reattached  []*model.Task // still open on the server, polled from here on
	Finished    []*model.Task // ended while taskdeck was away
	Unknown     []*model.Task // the server no longer knows them
	Orphaned    []*model.Task // calls whose handle never arrived
	Unreachable []*model.Task // could not be checked now; polled again later
}

// OrphanStale turns the `calling` intents a crash left behind into
// `orphaned` (their call may be running; they are never re-sent) and
// returns every orphan, old and new.
func (t *Tracker) OrphanStale() ([]*model.Task, error) {
	found, err := t.store.ByStatus(model.StatusCalling, model.StatusOrphaned)
	if err != nil {
		return nil, err
	}
	for i, rec := range found {
		if rec.Status != model.StatusCalling {
			continue
		}
		found[i], err = t.store.Update(rec.ID, func(r *model.Task) (bool, error) {
			msg := "taskdeck stopped before the server's answer arrived; the server may have started this call"
			r.StatusMessage = msg
			return true, r.MoveTo(model.StatusOrphaned, msg, t.now())
		})
		if err != nil {
			return nil, err
		}
	}
	return found, nil
}

// Reconcile runs at start: stale intents become orphans, then every open
// task is polled once, at most perServer at a time per server.
func (t *Tracker) Reconcile(ctx context.Context, perServer int) (*Report, error) {
	orphans, err := t.OrphanStale()
	if err != nil {
		return nil, err
	}
	rep := &Report{Orphaned: orphans}
	open, err := t.store.ByStatus(model.StatusWorking, model.StatusInputRequired)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(open))
	for i, rec := range open {
		ids[i] = rec.ID
	}
	// One poll each: OnPoll lets every task go after its first answer.
	err = t.Watch(ctx, ids, WatchOptions{PerServer: perServer, OnPoll: func(res PollResult) bool {
		rep.Add(res)
		return false
	}})
	return rep, err
}

// Add files a task by the outcome of its first poll after start.
func (r *Report) Add(res PollResult) {
	switch {
	case res.Err != nil:
		r.Unreachable = append(r.Unreachable, res.Task)
	case res.Task.Status == model.StatusUnknown:
		r.Unknown = append(r.Unknown, res.Task)
	case res.Task.Status.Terminal():
		r.Finished = append(r.Finished, res.Task)
	default:
		r.Reattached = append(r.Reattached, res.Task)
	}
}

// String is the one-line summary the command line and the dashboard show.
func (r *Report) String() string {
	return fmt.Sprintf("reconciled: %d re-attached · %d finished meanwhile · %d unknown · %d orphaned · %d unreachable",
		len(r.Reattached), len(r.Finished), len(r.Unknown), len(r.Orphaned), len(r.Unreachable))
}

// WatchOptions tune Watch.
type WatchOptions struct {
	PerServer int // polls in flight per server; mcpclient.DefaultPerServer when 0
	// OnPoll sees every poll's outcome. It returns whether to keep watching
	// the task; Watch stops on its own once a task has ended.
	OnPoll func(PollResult) (keep bool)
	// MaxFailures lets a task go after this many failed polls in a row
	// (its record stays open, for a later watch); 0: never.
	MaxFailures int
}

// Watch polls the given tasks, each on its own schedule, until every one
// has ended, failed MaxFailures polls in a row, or OnPoll let it go, or
// ctx ends. At most PerServer polls per
// server are in flight; waiting tasks cost no goroutine.
func (t *Tracker) Watch(ctx context.Context, ids []string, opts WatchOptions) error {
	if opts.OnPoll == nil {
		opts.OnPoll = func(PollResult) bool { return true }
	}
	type outcome struct {
		id  string
		res PollResult
		err error
	}
	sched := model.NewSchedule(cmp.Or(opts.PerServer, mcpclient.DefaultPerServer))
	for _, id := range ids {
		rec, err := t.store.Get(id)
		if err != nil {
			return err
		}
		sched.Set(id, rec.Server, t.firstPoll(id))
	}
	results := make(chan outcome)
	timer := time.NewTimer(0)
	defer timer.Stop()
	for sched.Len() > 0 {
		now := time.Now()
		for _, id := range sched.Take(now) {
			go func() {
				res, err := t.Poll(ctx, id)
				select {
				case results <- outcome{id, res, err}:
				case <-ctx.Done():
				}
			}()
		}
		// What is due for a full server waits for a slot, which only a
		// result frees: wake for what can be taken, and do not spin.
		wait := time.Hour
		if at, ok := sched.Wake(); ok {
			wait = max(time.Until(at), 0)
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case o := <-results:
			if o.err != nil {
				return o.err
			}
			var next time.Time
			gaveUp := opts.MaxFailures > 0 && o.res.Errors >= opts.MaxFailures
			if opts.OnPoll(o.res) && o.res.Next > 0 && !gaveUp {
				next = time.Now().Add(o.res.Next)
			}
			sched.Done(o.id, next)
		case <-timer.C:
		}
	}
	return nil
}

// firstPoll is when a watch polls a task first: when this tracker's last
// poll of it said (a reconcile just polled it), else at once.
func (t *Tracker) firstPoll(id string) time.Time {
	if next := t.PollStatus(id).Next; !next.IsZero() {
		return next
	}
	return time.Now()
}
