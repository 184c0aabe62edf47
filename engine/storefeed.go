package engine

import (
	"github.com/taskdeck/taskdeck/store"
)

// change is one committed change, as the store's commit hook reports it.
type change = store.Change

// watchStore feeds every synced commit to the hub, in revision order; on
// a shared store the engine also hears there of cancels and answers made
// elsewhere.
func (e *Engine) watchStore() {
	e.feeds.rev = e.store.Revision()
	e.store.SetCommitHook(func(changes []change) {
		e.feeds.committed(changes)
		e.own.committed(changes)
		e.notifier.wake()
		e.deadlinesHeard(changes)
	})
}

func (e *Engine) changesSince(rev uint64) ([]change, uint64, bool, error) {
	return e.store.ChangesSince(rev)
}
