package engine

import (
	"time"

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

// matches pairs each orphan with the one listed task in its window, when
// that task is in no other orphan's window.
func (t *tracker) matches(recs []*model.Task, listed []*model.Snapshot) map[*model.Task]*model.Snapshot {
	fits := t.fits
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

// fits tells a listed task created in an intent's window.
func (t *tracker) fits(r *model.Task, s *model.Snapshot) bool {
	return !s.CreatedAt.IsZero() && !s.CreatedAt.Before(r.CreatedAt.Add(-adoptSkew)) &&
		!s.CreatedAt.After(r.CreatedAt.Add(t.requestTimeout+adoptSkew))
}
