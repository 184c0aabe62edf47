package engine

import (
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
