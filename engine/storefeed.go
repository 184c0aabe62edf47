package engine

import "github.com/taskdeck/taskdeck/model"

// change is one committed change: the record as committed, or nil when it
// was deleted.
type change struct {
	Rev  uint64
	ID   string
	Task *model.Task
}

// watchStore will subscribe the feed to the store's commit hook.
func (e *Engine) watchStore() {}

func (e *Engine) snapshot() (uint64, []*model.Task, error) {
	tasks, err := e.store.All()
	return 0, tasks, err
}

func (e *Engine) changesSince(uint64) ([]change, uint64, bool, error) {
	return nil, 0, false, nil
}
