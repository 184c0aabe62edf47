package engine

import (
	"errors"
	"fmt"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/engine/fleet"
	"github.com/taskdeck/taskdeck/store"
	"github.com/taskdeck/taskdeck/termtext"
)

// watchHealth makes the engine hear its shared database's reach: the
// listener's word and every request's, which the store tells.
func (e *Engine) watchHealth(pg store.Shared) {
	e.health = fleet.NewHealth(func(s deck.Store) {
		if s.Up {
			e.log.Info("the database is back; polling resumes")
		} else {
			e.log.Warn("the database is unreachable; polling paused until it is back", "err", s.Error)
		}
		e.feeds.storeChanged(s)
	})
	pg.SetHealthHook(e.health.Listened)
}

// handleLostError means that the server made a task, but the database was lost
// before its handle was recorded. The record stays the call's intent.
type handleLostError struct {
	ID     string // the record, still `calling`
	TaskID string // the server's task id, recorded nowhere else
	Err    error
}

func (e *handleLostError) Error() string {
	return fmt.Sprintf("the server made task %s, but the database was lost or refused the write before its handle was recorded: record %s stays calling "+
		"(an engine marks it orphaned once the database is back and the call's time is over); the server's task id %s is only here (%v)", e.TaskID, e.ID, e.TaskID, e.Err)
}

func (e *handleLostError) Unwrap() error { return e.Err }

// handleLost words a failed write of a call's handle when the database
// was lost; any other error is passed on.
func handleLost(id, taskID string, err error) error {
	if !store.Unreachable(err) && !store.RefusesWrites(err) {
		return err
	}
	return &handleLostError{ID: id, TaskID: taskID, Err: err}
}

// storeDown words a request that failed because the database was lost,
// with what was recorded (taskID: the record it leaves, as last
// committed) and what to do.
func storeDown(err error, taskID string) *deck.Error {
	state := "is unreachable"
	if store.RefusesWrites(err) {
		state = "refuses writes"
	}
	msg := fmt.Sprintf("the database %s (%v); nothing was recorded: try again once it is back", state, err)
	var hl *handleLostError
	switch {
	case errors.As(err, &hl):
		msg, taskID = hl.Error(), hl.ID
	case taskID != "":
		msg = fmt.Sprintf("the database %s (%v); task %s stays as last recorded: try again once it is back", state, err, taskID)
	}
	return &deck.Error{Kind: deck.KindStoreDown, Message: termtext.OneLine(msg, 0), TaskID: taskID, Err: err}
}
