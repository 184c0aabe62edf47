package store

import (
	"errors"
	"fmt"
	"os"

	"github.com/taskdeck/taskdeck/model"
)

// ErrNotFound is returned (wrapped with the id or key) when no record
// matches.
var ErrNotFound = errors.New("task not found")

// LockedError says that another process (or this one) already has the
// store open. Badger allows one owner per directory.
type LockedError struct {
	Dir string
	PID int // read from Badger's LOCK file; 0 when it could not be read
}

func (e *LockedError) Error() string {
	switch e.PID {
	case 0:
		return fmt.Sprintf("store %s is in use by another taskdeck; close it or use --data-dir", e.Dir)
	case os.Getpid():
		return fmt.Sprintf("store %s is already open in this process (pid %d); close it first", e.Dir, e.PID)
	}
	return fmt.Sprintf("store %s is in use by another taskdeck (pid %d); close it or use --data-dir", e.Dir, e.PID)
}

// CorruptError says Badger refused to open the store because its files
// are damaged.
type CorruptError struct {
	Dir    string
	Reason string // Badger's message, on one line
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("store %s is damaged: %s; move it aside and start again", e.Dir, e.Reason)
}

// DecodeError says a stored record or entry is not what its store wrote:
// the backend words it as its store damaged (Badger: a *CorruptError).
type DecodeError struct{ Err error }

func (e *DecodeError) Error() string { return e.Err.Error() }
func (e *DecodeError) Unwrap() error { return e.Err }

// DuplicateKeyError says an idempotency key already names a record.
type DuplicateKeyError struct {
	Key      string
	Existing *model.Task
}

func (e *DuplicateKeyError) Error() string {
	return fmt.Sprintf("idempotency key %q already names task %s", e.Key, e.Existing.ID)
}

// ErrFenced refuses a write made under a claim that no longer holds: the
// writer's lease ran out, or another process took the task over. Nothing
// was written; the task's new holder writes what its server says.
var ErrFenced = errors.New("this engine's claim on the task was lost (its lease ran out); another engine polls it now, and nothing was written")

// availability is implemented by the errors of a backend shared over the
// network, which may be away or refuse writes for a while.
type availability interface {
	Unreachable() bool
	RefusesWrites() bool
}

// Unreachable tells whether err says the backend's database could not be
// reached (refused, dropped, timed out, shutting down), as against an
// answer it gave. Badger's errors never do: its failures are its disk's.
func Unreachable(err error) bool {
	var a availability
	return errors.As(err, &a) && a.Unreachable()
}

// RefusesWrites tells whether err says the backend's database answered but
// takes no writes now (read-only, out of disk, memory or connections):
// like an unreachable one, the database's state to fix, not the request's.
func RefusesWrites(err error) bool {
	var a availability
	return errors.As(err, &a) && a.RefusesWrites()
}
