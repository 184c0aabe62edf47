package deck

import (
	"errors"
	"fmt"
)

// Kind sorts a deck error for its frontends: the command line maps each
// to an exit code, the socket carries it across, the dashboard words it.
type Kind string

const (
	KindUsage       Kind = "usage"       // the caller can fix it by changing the request
	KindNotFound    Kind = "notFound"    // no record with that id (or prefix)
	KindState       Kind = "state"       // the action does not fit the task's status
	KindConflict    Kind = "conflict"    // an idempotency key names another call
	KindNeedsInput  Kind = "needsInput"  // input is needed that nobody gave
	KindUnreachable Kind = "unreachable" // a server could not be reached or did not answer in time
	KindRefused     Kind = "refused"     // a server answered, with a refusal or an unreadable answer
	KindLocal       Kind = "local"       // the store's own failure: damaged, unwritable, full
	KindLocked      Kind = "locked"      // the store is held by a process that serves no deck
	KindOwnerGone   Kind = "ownerGone"   // the owner went away mid-request; the record is what was committed
	KindCanceled    Kind = "canceled"    // the caller's context ended
	KindFellBehind  Kind = "fellBehind"  // a feed's watcher read too slowly and was cut off: watch again from its last revision
	KindStoreDown   Kind = "storeDown"   // the shared database could not be reached; the message says what was recorded
	KindFailed      Kind = "failed"      // anything else
)

// Error is a deck error: a kind and a one-line message that says what
// was wrong and what to do. Task, when set, is the record as it stands
// after the failed request (a refused call leaves a failed record, say).
type Error struct {
	Kind    Kind   `json:"kind"`
	Message string `json:"message"`
	// Task is the record the error leaves behind, if any.
	TaskID string `json:"taskId,omitempty"`
	// Err is the cause in process; it does not cross the socket.
	Err error `json:"-"`
}

func (e *Error) Error() string { return e.Message }
func (e *Error) Unwrap() error { return e.Err }

// Errorf makes a deck error of a kind.
func Errorf(kind Kind, format string, args ...any) *Error {
	err := fmt.Errorf(format, args...)
	return &Error{Kind: kind, Message: err.Error(), Err: errors.Unwrap(err)}
}

// KindOf returns the kind of a deck error anywhere in err's chain, and
// KindFailed for any other error (nil for nil is "").
func KindOf(err error) Kind {
	if err == nil {
		return ""
	}
	var de *Error
	if errors.As(err, &de) {
		return de.Kind
	}
	return KindFailed
}
