package engine

import (
	"errors"
	"fmt"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/engine/fleet"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store"
	"github.com/taskdeck/taskdeck/termtext"
)

// watched is a backend whose every outcome the health hears.
type watched struct {
	store.Backend
	h *fleet.Health
}

// seen passes a result on after the health heard its error.
func seen[T any](h *fleet.Health) func(T, error) (T, error) {
	return func(v T, err error) (T, error) {
		h.Note(err)
		return v, err
	}
}

func (w *watched) Create(rec *model.Task) error {
	err := w.Backend.Create(rec)
	w.h.Note(err)
	return err
}

func (w *watched) Delete(id string, by model.Actor) error {
	err := w.Backend.Delete(id, by)
	w.h.Note(err)
	return err
}

func (w *watched) Update(id string, fn func(t *model.Task) (bool, error)) (*model.Task, error) {
	return seen[*model.Task](w.h)(w.Backend.Update(id, fn))
}

func (w *watched) ReleaseKey(id string, release func(t *model.Task) bool) (*model.Task, error) {
	return seen[*model.Task](w.h)(w.Backend.ReleaseKey(id, release))
}

func (w *watched) Get(id string) (*model.Task, error) {
	return seen[*model.Task](w.h)(w.Backend.Get(id))
}

func (w *watched) ByKey(key string) (*model.Task, error) {
	return seen[*model.Task](w.h)(w.Backend.ByKey(key))
}

func (w *watched) ByStatus(st ...model.Status) ([]*model.Task, error) {
	return seen[[]*model.Task](w.h)(w.Backend.ByStatus(st...))
}

func (w *watched) OpenTasks() ([]*model.Task, error) {
	return seen[[]*model.Task](w.h)(w.Backend.OpenTasks())
}

func (w *watched) All() ([]*model.Task, error) { return seen[[]*model.Task](w.h)(w.Backend.All()) }

func (w *watched) Newest(limit int) ([]*model.Task, error) {
	return seen[[]*model.Task](w.h)(w.Backend.Newest(limit))
}

func (w *watched) Prune(cutoff time.Time, by model.Actor) (int, error) {
	return seen[int](w.h)(w.Backend.Prune(cutoff, by))
}

func (w *watched) Counts() (map[model.Status]int, error) {
	return seen[map[model.Status]int](w.h)(w.Backend.Counts())
}

func (w *watched) Snapshot() (uint64, []*model.Task, error) {
	rev, tasks, err := w.Backend.Snapshot()
	w.h.Note(err)
	return rev, tasks, err
}

func (w *watched) ChangesSince(rev uint64) ([]store.Change, uint64, bool, error) {
	changes, upTo, ok, err := w.Backend.ChangesSince(rev)
	w.h.Note(err)
	return changes, upTo, ok, err
}

// watchHealth makes the engine hear its shared database's reach: the
// listener's word and every request's. It returns the backend to use.
func (e *Engine) watchHealth(st store.Backend, pg store.Shared) store.Backend {
	e.health = fleet.NewHealth(func(s deck.Store) {
		if s.Up {
			e.log.Info("the database is back; polling resumes")
		} else {
			e.log.Warn("the database is unreachable; polling paused until it is back", "err", s.Error)
		}
		e.feeds.storeChanged(s)
	})
	pg.SetHealthHook(e.health.Listened)
	return &watched{Backend: st, h: e.health}
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
