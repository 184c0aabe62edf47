package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/taskdeck/taskdeck/deck"
)

// Exit codes, documented in the README and in `taskdeck --help`.
const (
	exitOK          = 0
	exitTaskBad     = 1   // a task ended badly, a refused call, and anything unrecognised
	exitUsage       = 2   // bad flags, arguments, config, ids or answers
	exitUnreachable = 3   // a server or the shared database could not be reached or did not answer in time, or the database refuses writes
	exitStoreLocked = 4   // another taskdeck holds the store
	exitWaiting     = 5   // call stopped at input nobody here gives; the record stays
	exitLocal       = 6   // the store's own failure: damaged, unwritable, full
	exitTimedOut    = 7   // watch --timeout ran out with tasks still open
	exitInterrupted = 130 // stopped by ctrl+c or SIGTERM; tasks keep running on their servers
)

const exitCodesHelp = `Exit codes:
  0    success
  1    a task ended badly (failed, cancelled, unknown, orphaned, or a tool error),
       the server refused the call, or any other failure
  2    usage error (flags, arguments, config, task ids, answers; no terminal for the dashboard)
  3    a server could not be reached or did not answer in time, or the shared
       database could not be reached or refuses writes (read-only, full; the
       message says what was recorded)
  4    the store is held by a process that serves no deck (or, for serve,
       another taskdeck already serves it)
  5    call stopped at input nobody here gives: a task that waits for input
       (--wait), or a call the server asks about before it starts the task
  6    the store's own failure (damaged, not writable, disk full)
  7    watch --timeout ran out with tasks still open (they keep running)
  130  interrupted (ctrl+c, SIGTERM); tasks keep running on their servers`

// exitError carries an exit code up to Execute.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func usageErr(format string, args ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, args...)}
}

// exitCode maps an error to the documented exit codes: a deck error by
// its kind, the command line's own by the code it carries.
func exitCode(err error) int {
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	switch deck.KindOf(err) {
	case deck.KindUsage, deck.KindNotFound, deck.KindConflict, deck.KindState, deck.KindNeedsInput:
		return exitUsage
	case deck.KindUnreachable, deck.KindStoreDown:
		return exitUnreachable
	case deck.KindLocked:
		return exitStoreLocked
	case deck.KindLocal:
		return exitLocal
	case deck.KindCanceled:
		return exitInterrupted
	}
	// What no deck classified: a command stopped by its context.
	switch {
	case errors.Is(err, context.Canceled):
		return exitInterrupted
	case errors.Is(err, context.DeadlineExceeded):
		return exitUnreachable
	}
	return exitTaskBad // refused, failed, ownerGone, and anything unrecognised
}

// errInterrupted is the one line for a command stopped by a signal.
var errInterrupted = &exitError{code: exitInterrupted, err: errors.New(
	"stopped following; open tasks on HTTP servers keep running, and `taskdeck watch` follows them again (those of stdio servers stopped with taskdeck)")}
