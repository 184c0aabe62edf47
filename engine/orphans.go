package engine

import (
	"github.com/taskdeck/taskdeck/model"
)

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
