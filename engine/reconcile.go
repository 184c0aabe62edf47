package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/mcpclient"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store"
)

// Reconcile compares the tasks the 2025-11-25 servers in use list
// (tasks/list; in use: a server of an open, orphaned or found record)
// with the records. Orphaned intents are resolved by a listed task that
// no record holds, by the time and uniqueness rule (the revision's Task
// carries neither tool nor arguments): a listed task created on the
// orphan's server within [intent created − adoptSkew, intent created +
// request timeout + adoptSkew] is adopted when it is the only such task
// for that orphan and that orphan the only one it fits. Every other
// listed task no record holds is recorded as found (model.NewFound) for
// the operator to adopt or leave, except one in the window of an intent
// still calling (its own call's answer is on the way). Servers that
// cannot list are skipped; a server that fails is reported and the
// others still tried. One runs at a time in a process; engines of a
// fleet reconciling at once may both resolve an orphan and record its
// task as found (the operator leaves the found row).
func (t *tracker) Reconcile(ctx context.Context) (deck.Reconciled, error) {
	t.reconciling.Lock()
	defer t.reconciling.Unlock()
	var out deck.Reconciled
	servers, err := t.serversInUse()
	if err != nil || len(servers) == 0 {
		return out, err // the common case (no legacy server) lists nothing
	}
	var errs []error
	listed := map[model.ServerRef][]*model.Snapshot{}
	for _, ref := range servers {
		sess, err := t.session(ctx, ref)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		lctx, cancel := context.WithTimeout(ctx, t.requestTimeout)
		tasks, err := sess.ListTasks(lctx)
		cancel()
		switch {
		case errors.Is(err, mcpclient.ErrNoList):
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: %w", ref, err))
		default:
			listed[ref] = tasks
		}
	}
	if len(listed) == 0 {
		return out, errors.Join(errs...)
	}
	// Read after listing: a call whose task is listed has its intent (or
	// its handle) committed by now, so it is held or calling here.
	all, err := t.store.All()
	if err != nil {
		return out, errors.Join(append(errs, err)...)
	}
	held := map[string]bool{} // server + task id
	orphans := map[model.ServerRef][]*model.Task{}
	calling := map[model.ServerRef][]*model.Task{}
	for _, r := range all {
		switch {
		case r.TaskID != "":
			held[r.Server.String()+"\x00"+r.TaskID] = true
		case r.Status == model.StatusOrphaned:
			orphans[r.Server] = append(orphans[r.Server], r)
		case r.Status == model.StatusCalling:
			calling[r.Server] = append(calling[r.Server], r)
		}
	}
	for ref, tasks := range listed {
		var free []*model.Snapshot
		for _, s := range tasks {
			if !held[ref.String()+"\x00"+s.TaskID] {
				free = append(free, s)
			}
		}
		taken := map[*model.Snapshot]bool{}
		for rec, snap := range t.matches(orphans[ref], free) {
			taken[snap] = true
			got, err := t.adoptOrphan(rec, *snap)
			if err != nil {
				errs = append(errs, err)
			} else if got.TaskID == snap.TaskID {
				out.Adopted = append(out.Adopted, got.ID)
			}
		}
		for _, s := range free {
			if taken[s] || t.inWindow(calling[ref], s) {
				continue
			}
			rec := model.NewFound(ref, *s, t.now())
			rec.Act = &model.Act{Kind: model.ActFound, Actor: t.engine}
			var dup *store.DuplicateKeyError
			switch err := t.store.Create(rec); {
			case errors.As(err, &dup): // another engine of the fleet found it first
			case err != nil:
				errs = append(errs, err)
			default:
				out.Found = append(out.Found, rec.ID)
			}
		}
		t.refound(ref, tasks, all)
	}
	return out, errors.Join(errs...)
}

// serversInUse are the servers of the open, orphaned and found records.
func (t *tracker) serversInUse() ([]model.ServerRef, error) {
	open, err := t.store.OpenTasks()
	if err != nil {
		return nil, err
	}
	more, err := t.store.ByStatus(model.StatusOrphaned, model.StatusFound)
	if err != nil {
		return nil, err
	}
	seen := map[model.ServerRef]bool{}
	var out []model.ServerRef
	for _, r := range append(open, more...) {
		if !seen[r.Server] {
			seen[r.Server] = true
			out = append(out, r.Server)
		}
	}
	return out, nil
}

// adoptOrphan resolves an orphan by the listed task it matched.
func (t *tracker) adoptOrphan(rec *model.Task, snap model.Snapshot) (*model.Task, error) {
	if snap.Status.Terminal() {
		// Its outcome comes from the next poll (tasks/result).
		snap.StatusMessage = fmt.Sprintf("the server lists the task %s; fetching its outcome", snap.Status)
		snap.Status = model.StatusWorking
	}
	return t.polledWrite(rec.ID, func(r *model.Task) (bool, error) {
		if r.Status != model.StatusOrphaned || r.TaskID != "" {
			return false, nil // moved on meanwhile
		}
		r.Act = &model.Act{Kind: model.ActUpdate, Actor: t.engine}
		return r.Adopt(snap, t.now())
	})
}

// inWindow tells a listed task that an intent still calling may have
// made (the window of the orphan rule; any, without a creation time).
func (t *tracker) inWindow(recs []*model.Task, s *model.Snapshot) bool {
	for _, r := range recs {
		if s.CreatedAt.IsZero() || t.fits(r, s) {
			return true
		}
	}
	return false
}

// refound puts what the server lists now on its found records.
func (t *tracker) refound(ref model.ServerRef, tasks []*model.Snapshot, all []*model.Task) {
	byID := make(map[string]*model.Snapshot, len(tasks))
	for _, s := range tasks {
		byID[s.TaskID] = s
	}
	for _, r := range all {
		s := byID[r.TaskID]
		if r.Server != ref || r.Status != model.StatusFound || s == nil {
			continue
		}
		_, err := t.store.Update(r.ID, func(r *model.Task) (bool, error) {
			r.Act = &model.Act{Kind: model.ActUpdate, Actor: t.engine}
			return r.Refound(*s, t.now()), nil
		})
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			t.log.Warn("updating a found task", "id", r.ID, "err", err)
		}
	}
}

// SettleFound adopts a found task (found → working, watched from now on)
// or leaves it to its server (found → left), the act naming the actor
// ctx names.
func (t *tracker) SettleFound(ctx context.Context, id string, adopt bool) (*model.Task, error) {
	defer t.tasks.lock(id)()
	var refused error
	rec, err := t.store.Update(id, func(r *model.Task) (bool, error) {
		if r.Status != model.StatusFound {
			refused = &stateError{Task: r.Clone(), Want: "only a found task (one the server listed and no record held) is adopted or left"}
			return false, nil
		}
		kind, move := model.ActLeave, r.LeaveFound
		if adopt {
			kind, move = model.ActAdopt, r.AdoptFound
		}
		r.Act = &model.Act{Kind: kind, Actor: actorOf(ctx)}
		return true, move(t.now())
	})
	if err == nil {
		err = refused
	}
	return rec, err
}

// SettleFound implements deck.Deck. An adopted task is polled at once
// (its status, and its result when it has ended) and watched.
func (e *Engine) SettleFound(ctx context.Context, id string, adopt bool) (*model.Task, error) {
	what := "leave a found task"
	if adopt {
		what = "adopt a found task"
	}
	ctx, done, err := e.beginChange(ctx, what)
	if err != nil {
		return nil, err
	}
	defer done()
	rec, err := e.resolve(id)
	if err != nil {
		return nil, err
	}
	if rec, err = e.tracker.SettleFound(ctx, rec.ID, adopt); err != nil {
		return rec, classify(err, idOf(rec))
	}
	if !adopt || e.own.elsewhere(rec) {
		return rec, nil
	}
	return e.pollOnce(ctx, rec)
}

// Reconcile implements deck.Deck. The orphans it resolves are polled at
// once, and so watched from then on.
func (e *Engine) Reconcile(ctx context.Context) (deck.Reconciled, error) {
	ctx, done, err := e.beginChange(ctx, "reconcile with the servers' task lists")
	if err != nil {
		return deck.Reconciled{}, err
	}
	defer done()
	return e.reconcile(deck.WithActor(ctx, e.actor(ctx)))
}

func (e *Engine) reconcile(ctx context.Context) (deck.Reconciled, error) {
	res, err := e.tracker.Reconcile(ctx)
	if len(res.Adopted) > 0 {
		if perr := e.PollNow(ctx, res.Adopted); perr != nil {
			err = errors.Join(err, perr)
		}
	}
	return res, classify(err, "")
}
