package cli

import (
	"context"
	"errors"
	"fmt"
	"syscall"

	"github.com/taskdeck/taskdeck/mcpclient"
	"github.com/taskdeck/taskdeck/store"
)

// Exit codes, documented in the README and in `taskdeck --help`.
const (
	exitOK          = 0
	exitTaskBad     = 1   // a task ended badly, a refused call, and anything unrecognised
	exitUsage       = 2   // bad flags, arguments, config, ids or answers
	exitUnreachable = 3   // a server could not be reached or did not answer in time
	exitStoreLocked = 4   // another taskdeck holds the store
	exitWaiting     = 5   // call --wait stopped at a task waiting for input
	exitLocal       = 6   // the store's own failure: damaged, unwritable, full
	exitTimedOut    = 7   // watch --timeout ran out with tasks still open
	exitInterrupted = 130 // stopped by ctrl+c or SIGTERM; tasks keep running on their servers
)

const exitCodesHelp = `Exit codes:
  0    success
  1    a task ended badly (failed, cancelled, unknown, orphaned, or a tool error),
       the server refused the call, or any other failure
  2    usage error (flags, arguments, config, task ids, answers; no terminal for the dashboard)
  3    a server could not be reached or did not answer in time
  4    the store is held by another taskdeck process
  5    call --wait stopped at a task that waits for input
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

// exitCode maps an error to the documented exit codes. Exit 6 is only
// for the store's own failures: anything unrecognised is 1.
func exitCode(err error) int {
	var ee *exitError
	var locked *store.LockedError
	var te *mcpclient.TransportError
	switch {
	case errors.As(err, &ee):
		return ee.code
	case errors.As(err, &locked):
		return exitStoreLocked
	case errors.Is(err, context.Canceled):
		return exitInterrupted
	case errors.As(err, &te) && te.Answered():
		return exitTaskBad
	case errors.As(err, &te) || errors.Is(err, context.DeadlineExceeded):
		return exitUnreachable
	case isUsage(err):
		return exitUsage
	case isLocal(err):
		return exitLocal
	default:
		return exitTaskBad
	}
}

// isUsage reports errors that the operator fixes by changing the command.
func isUsage(err error) bool {
	var cfg *mcpclient.ConfigError
	var key *mcpclient.KeyConflictError
	var input *mcpclient.InputKeyError
	var state *mcpclient.StateError
	var need *mcpclient.InputNeededError
	var answer *mcpclient.AnswerError
	return errors.As(err, &cfg) || errors.As(err, &key) || errors.As(err, &input) ||
		errors.As(err, &state) || errors.As(err, &need) || errors.As(err, &answer) ||
		errors.Is(err, store.ErrNotFound)
}

// isLocal reports the store's own failures wherever they surface: damage,
// no room to flush, a file system that refuses writes.
func isLocal(err error) bool {
	var corrupt *store.CorruptError
	return errors.As(err, &corrupt) || errors.Is(err, store.ErrNoRoomToFlush) ||
		errors.Is(err, syscall.EROFS) || errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EIO)
}

// localErr marks an error of the store as a local failure (exit 6); the
// store held by another process keeps its own code.
func localErr(err error) error {
	var locked *store.LockedError
	if err == nil || errors.As(err, &locked) {
		return err
	}
	return &exitError{code: exitLocal, err: err}
}

// errInterrupted is the one line for a command stopped by a signal.
var errInterrupted = &exitError{code: exitInterrupted, err: errors.New(
	"stopped following; open tasks on HTTP servers keep running, and `taskdeck watch` follows them again (those of stdio servers stopped with taskdeck)")}
