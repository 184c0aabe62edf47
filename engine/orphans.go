package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/taskdeck/taskdeck/mcpclient"
	"github.com/taskdeck/taskdeck/model"
)

// OrphanStale turns the `calling` intents a crash left behind into
// `orphaned` (their call may be running; they are never re-sent) and
// returns every orphan, old and new.
func (t *tracker) OrphanStale() ([]*model.Task, error) {
	found, err := t.store.ByStatus(model.StatusCalling, model.StatusOrphaned)
	if err != nil {
		return nil, err
	}
	for i, rec := range found {
		if rec.Status != model.StatusCalling {
			continue
		}
		if found[i], err = t.Orphan(rec.ID); err != nil {
			return nil, err
		}
	}
	return found, nil
}

// Orphan turns a `calling` intent whose process died into `orphaned`: its
// call may be running, and it is never re-sent. A record that has moved
// on meanwhile is left as it is. On a shared store it is written under
// the claim of the engine that found it.
func (t *tracker) Orphan(id string) (*model.Task, error) {
	return t.polledWrite(id, func(r *model.Task) (bool, error) {
		if r.Status != model.StatusCalling {
			return false, nil
		}
		msg := "taskdeck stopped before the server's answer arrived; the server may have started this call"
		r.StatusMessage = msg
		r.Act = &model.Act{Kind: model.ActOrphan, Actor: t.engine}
		return true, r.MoveTo(model.StatusOrphaned, msg, t.now())
	})
}

// adoptSkew widens an orphan's window for the clocks of taskdeck and the
// server, which need not agree.
const adoptSkew = 5 * time.Second

// AdoptOrphans resolves orphaned intents by the tasks a 2025-11-25 server
// lists (tasks/list): the one window no call can recover, a crash
// between the server's CreateTaskResult and the commit of its handle.
// The revision's Task carries neither tool nor arguments, so the rule is
// the time and uniqueness only: a listed task no record holds, created
// on the orphan's server within [intent created − adoptSkew, intent
// created + request timeout + adoptSkew], is adopted when it is the only
// such task for that orphan and that orphan the only one it fits; any
// other orphan stays orphaned. Servers that cannot list are skipped; a
// server that fails is reported and the others still tried.
func (t *tracker) AdoptOrphans(ctx context.Context) ([]*model.Task, error) {
	if found, err := t.store.ByStatus(model.StatusOrphaned); err != nil || len(found) == 0 {
		return nil, err // the common case reads no other record
	}
	all, err := t.store.All()
	if err != nil {
		return nil, err
	}
	held := map[string]bool{} // server + task id
	orphans := map[model.ServerRef][]*model.Task{}
	for _, r := range all {
		switch {
		case r.TaskID != "":
			held[r.Server.String()+"\x00"+r.TaskID] = true
		case r.Status == model.StatusOrphaned:
			orphans[r.Server] = append(orphans[r.Server], r)
		}
	}
	var adopted []*model.Task
	var errs []error
	for ref, recs := range orphans {
		sess, err := t.session(ctx, ref)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		lctx, cancel := context.WithTimeout(ctx, t.requestTimeout)
		listed, err := sess.ListTasks(lctx)
		cancel()
		if errors.Is(err, mcpclient.ErrNoList) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		var free []*model.Snapshot
		for _, s := range listed {
			if !held[ref.String()+"\x00"+s.TaskID] {
				free = append(free, s)
			}
		}
		for rec, snap := range t.matches(recs, free) {
			if snap.Status.Terminal() {
				// Its outcome comes from the next poll (tasks/result).
				snap.StatusMessage = fmt.Sprintf("the server lists the task %s; fetching its outcome", snap.Status)
				snap.Status = model.StatusWorking
			}
			got, err := t.polledWrite(rec.ID, func(r *model.Task) (bool, error) {
				if r.Status != model.StatusOrphaned || r.TaskID != "" {
					return false, nil // moved on meanwhile
				}
				r.Act = &model.Act{Kind: model.ActUpdate, Actor: t.engine}
				return r.Adopt(*snap, t.now())
			})
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if got.TaskID == snap.TaskID {
				adopted = append(adopted, got)
			}
		}
	}
	return adopted, errors.Join(errs...)
}

// matches pairs each orphan with the one listed task in its window, when
// that task is in no other orphan's window.
func (t *tracker) matches(recs []*model.Task, listed []*model.Snapshot) map[*model.Task]*model.Snapshot {
	fits := func(r *model.Task, s *model.Snapshot) bool {
		return !s.CreatedAt.IsZero() && !s.CreatedAt.Before(r.CreatedAt.Add(-adoptSkew)) &&
			!s.CreatedAt.After(r.CreatedAt.Add(t.requestTimeout+adoptSkew))
	}
	out := map[*model.Task]*model.Snapshot{}
	for _, r := range recs {
		var only *model.Snapshot
		n := 0
		for _, s := range listed {
			if fits(r, s) {
				only, n = s, n+1
			}
		}
		if n != 1 {
			continue
		}
		shared := false
		for _, other := range recs {
			shared = shared || (other != r && fits(other, only))
		}
		if !shared {
			out[r] = only
		}
	}
	return out
}
