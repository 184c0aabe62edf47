package engine

import (
	"context"
	"sync"

	"github.com/taskdeck/taskdeck/model"
)

// bulkPerServer bounds the tasks/cancel requests CancelMany has in flight
// per server, over every CancelMany running: 2,000 cancels reach a server
// 16 at a time, neither one by one nor all at once.
const bulkPerServer = 16

// bulkSlots are the per-server slots of CancelMany, shared by every call.
type bulkSlots struct {
	mu    sync.Mutex
	slots map[model.ServerRef]chan struct{}
}

func (b *bulkSlots) of(ref model.ServerRef) chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.slots == nil {
		b.slots = map[model.ServerRef]chan struct{}{}
	}
	s := b.slots[ref]
	if s == nil {
		s = make(chan struct{}, bulkPerServer)
		b.slots[ref] = s
	}
	return s
}

// CancelMany implements deck.Deck. Each cancel is Cancel's tasks/cancel
// and cancel-requested mark; the concurrent marks share their syncs (the
// store commits concurrent writes as one group). Unlike Cancel it does not
// poll each task at once, which would double the requests and the
// writes: the loop polls each soon, within its own bound per server, and
// a server that pushes tells the outcome sooner still.
func (e *Engine) CancelMany(ctx context.Context, ids []string) []error {
	errs := make([]error, len(ids))
	ctx, done, err := e.beginChange(ctx, "cancel")
	if err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	defer done()
	full := make([]string, len(ids)) // the ids resolved (a prefix may be given)
	byServer := map[model.ServerRef][]int{}
	var order []model.ServerRef
	for i, id := range ids {
		rec, err := e.resolve(id)
		if err != nil {
			errs[i] = err
			continue
		}
		full[i] = rec.ID
		if byServer[rec.Server] == nil {
			order = append(order, rec.Server)
		}
		byServer[rec.Server] = append(byServer[rec.Server], i)
	}
	// One dispatcher per server, so that a busy server does not hold up
	// the cancels of another.
	var wg sync.WaitGroup
	for _, ref := range order {
		slots := e.bulk.of(ref)
		wg.Go(func() {
			var sent sync.WaitGroup
			defer sent.Wait()
			for _, i := range byServer[ref] {
				select {
				case slots <- struct{}{}:
				case <-ctx.Done():
					errs[i] = classify(ctx.Err(), full[i])
					continue
				}
				sent.Go(func() {
					defer func() { <-slots }()
					errs[i] = e.cancelSoon(ctx, full[i])
				})
			}
		})
	}
	wg.Wait()
	return errs
}

// cancelSoon sends one tasks/cancel and has the task polled soon: by its
// watcher on another engine, by the loop when it runs, else at once (as
// Cancel does).
func (e *Engine) cancelSoon(ctx context.Context, id string) error {
	rec, err := e.tracker.Cancel(ctx, id)
	switch {
	case err != nil:
		return classify(err, idOf(rec))
	case e.own.elsewhere(rec):
		return nil
	case e.running() != nil:
		e.due(rec, true)
		return nil
	}
	_, err = e.pollOnce(ctx, rec)
	return err
}
