package mcpclient

import (
	"container/heap"
	"context"
	"sync"
	"time"

	"github.com/taskdeck/taskdeck/model"
)

// DefaultPerServer bounds the polls in flight to one server.
const DefaultPerServer = 8

// Report is what start-up reconciliation found.
type Report struct {
	Reattached  []*model.Task // still open on the server, polled from here on
	Finished    []*model.Task // ended while taskdeck was away
	Unknown     []*model.Task // the server no longer knows them
	Orphaned    []*model.Task // calls whose handle never arrived
	Unreachable []*model.Task // could not be checked now; polled again later
}

// Reconcile runs at start: stale `calling` intents become `orphaned`
// (never silently re-sent), then every open task is polled once, at most
// perServer at a time per server.
func (t *Tracker) Reconcile(ctx context.Context, perServer int) (*Report, error) {
	calling, err := t.store.ByStatus(model.StatusCalling, model.StatusOrphaned)
	if err != nil {
		return nil, err
	}
	rep := &Report{}
	for _, rec := range calling {
		if rec.Status == model.StatusCalling {
			rec, err = t.store.Update(rec.ID, func(r *model.Task) (bool, error) {
				msg := "taskdeck stopped before the server's answer arrived; the server may have started this call"
				r.StatusMessage = msg
				return true, r.MoveTo(model.StatusOrphaned, msg, t.now())
			})
			if err != nil {
				return nil, err
			}
		}
		rep.Orphaned = append(rep.Orphaned, rec)
	}
	open, err := t.store.ByStatus(model.StatusWorking, model.StatusInputRequired)
	if err != nil {
		return nil, err
	}
	var mu sync.Mutex
	err = t.pollEach(ctx, open, perServer, func(res PollResult) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case res.Err != nil:
			rep.Unreachable = append(rep.Unreachable, res.Task)
		case res.Task.Status == model.StatusUnknown:
			rep.Unknown = append(rep.Unknown, res.Task)
		case res.Task.Status.Terminal():
			rep.Finished = append(rep.Finished, res.Task)
		default:
			rep.Reattached = append(rep.Reattached, res.Task)
		}
	})
	return rep, err
}

// pollEach polls each task once, bounded per server.
func (t *Tracker) pollEach(ctx context.Context, tasks []*model.Task, perServer int, done func(PollResult)) error {
	lim := newLimiter(perServer)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for _, rec := range tasks {
		if err := lim.acquire(ctx, rec.Server); err != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer lim.release(rec.Server)
			res, err := t.Poll(ctx, rec.ID)
			if err != nil {
				mu.Lock()
				firstErr = cmpErr(firstErr, err)
				mu.Unlock()
				return
			}
			done(res)
		}()
	}
	wg.Wait()
	return cmpErr(firstErr, ctx.Err())
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// WatchOptions tune Watch.
type WatchOptions struct {
	PerServer int // polls in flight per server; DefaultPerServer when 0
	// OnPoll sees every poll's outcome. It returns whether to keep watching
	// the task; Watch stops on its own once a task has ended.
	OnPoll func(PollResult) (keep bool)
}

// Watch polls the given tasks, each on its own schedule, until every one
// has ended or OnPoll let it go, or ctx ends. At most PerServer polls per
// server are in flight; waiting tasks cost no goroutine.
func (t *Tracker) Watch(ctx context.Context, ids []string, opts WatchOptions) error {
	if opts.PerServer <= 0 {
		opts.PerServer = DefaultPerServer
	}
	if opts.OnPoll == nil {
		opts.OnPoll = func(PollResult) bool { return true }
	}
	type outcome struct {
		id  string
		res PollResult
		err error
	}
	due := &dueHeap{}
	now := time.Now()
	for _, id := range ids {
		heap.Push(due, dueItem{id: id, at: now})
	}
	servers := map[string]model.ServerRef{}
	lim := newLimiter(opts.PerServer)
	results := make(chan outcome)
	inFlight := 0
	timer := time.NewTimer(0)
	defer timer.Stop()
	for due.Len() > 0 || inFlight > 0 {
		// Start every poll that is due, while its server has room.
		for due.Len() > 0 && !(*due)[0].at.After(time.Now()) {
			item := heap.Pop(due).(dueItem)
			ref, ok := servers[item.id]
			if !ok {
				rec, err := t.store.Get(item.id)
				if err != nil {
					return err
				}
				ref = rec.Server
				servers[item.id] = ref
			}
			if !lim.tryAcquire(ref) {
				heap.Push(due, dueItem{id: item.id, at: time.Now().Add(10 * time.Millisecond)})
				break
			}
			inFlight++
			go func() {
				defer lim.release(ref)
				res, err := t.Poll(ctx, item.id)
				select {
				case results <- outcome{item.id, res, err}:
				case <-ctx.Done():
				}
			}()
		}
		wait := time.Hour
		if due.Len() > 0 {
			wait = time.Until((*due)[0].at)
		}
		timer.Reset(max(wait, 0))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case o := <-results:
			inFlight--
			if o.err != nil {
				return o.err
			}
			keep := opts.OnPoll(o.res)
			if keep && o.res.Next > 0 {
				heap.Push(due, dueItem{id: o.id, at: time.Now().Add(o.res.Next)})
			}
		case <-timer.C:
		}
	}
	return nil
}

type dueItem struct {
	id string
	at time.Time
}

type dueHeap []dueItem

func (h dueHeap) Len() int           { return len(h) }
func (h dueHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h dueHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *dueHeap) Push(x any)        { *h = append(*h, x.(dueItem)) }
func (h *dueHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	*h = old[:len(old)-1]
	return it
}

// limiter bounds concurrent work per server.
type limiter struct {
	per int
	mu  sync.Mutex
	sem map[model.ServerRef]chan struct{}
}

func newLimiter(per int) *limiter {
	if per <= 0 {
		per = DefaultPerServer
	}
	return &limiter{per: per, sem: map[model.ServerRef]chan struct{}{}}
}

func (l *limiter) ch(ref model.ServerRef) chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	c, ok := l.sem[ref]
	if !ok {
		c = make(chan struct{}, l.per)
		l.sem[ref] = c
	}
	return c
}

func (l *limiter) acquire(ctx context.Context, ref model.ServerRef) error {
	select {
	case l.ch(ref) <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (l *limiter) tryAcquire(ref model.ServerRef) bool {
	select {
	case l.ch(ref) <- struct{}{}:
		return true
	default:
		return false
	}
}

func (l *limiter) release(ref model.ServerRef) { <-l.ch(ref) }
