package engine

import (
	"context"
	"errors"
	"syscall"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/mcpclient"
	mcpconfig "github.com/taskdeck/taskdeck/mcpclient/config"
	"github.com/taskdeck/taskdeck/store"
	"github.com/taskdeck/taskdeck/store/badger"
)

// classify makes err a *deck.Error of the kind its frontends act on, its
// message unchanged; taskID names the record the failure left behind.
func classify(err error, taskID string) error {
	if err == nil {
		return nil
	}
	var de *deck.Error
	if errors.As(err, &de) {
		if de.TaskID == "" && taskID != "" {
			c := *de
			c.TaskID = taskID
			return &c
		}
		return de
	}
	kind := kindOf(err)
	if kind == deck.KindStoreDown {
		return storeDown(err, taskID)
	}
	return &deck.Error{Kind: kind, Message: err.Error(), TaskID: taskID, Err: err}
}

// kindOf sorts an error as the command line's exit codes always have: the
// store held, an interruption, a server that answered out of protocol or
// could not be reached, the caller's mistakes, the store's own failures.
// The order matters: a refused call's error joins the server's cause with
// any store failure that followed it.
func kindOf(err error) deck.Kind {
	var (
		locked *store.LockedError
		te     *mcpclient.TransportError
		key    *keyConflictError
		state  *stateError
	)
	switch {
	case errors.As(err, &locked):
		return deck.KindLocked
	case errors.Is(err, context.Canceled):
		return deck.KindCanceled
	case errors.As(err, &te) && te.Answered():
		return deck.KindRefused
	case store.Unreachable(err), store.RefusesWrites(err): // before a deadline: a database that timed out
		return deck.KindStoreDown
	case errors.As(err, &te) || errors.Is(err, context.DeadlineExceeded):
		return deck.KindUnreachable
	case errors.As(err, &key):
		return deck.KindConflict
	case errors.As(err, &state):
		return deck.KindState
	case errors.Is(err, store.ErrNotFound):
		return deck.KindNotFound
	case isUsage(err):
		return deck.KindUsage
	case isLocal(err):
		return deck.KindLocal
	case errors.As(err, new(*mcpclient.ServerError)):
		return deck.KindRefused
	}
	return deck.KindFailed
}

// isUsage reports errors the caller fixes by changing the request.
func isUsage(err error) bool {
	return errors.As(err, new(*mcpconfig.ConfigError)) || errors.As(err, new(*inputKeyError)) ||
		errors.As(err, new(*answerError)) || errors.As(err, new(*mcpclient.CallError))
}

// isLocal reports the store's own failures wherever they surface: damage,
// no room to flush, a file system that refuses writes.
func isLocal(err error) bool {
	return errors.As(err, new(*store.CorruptError)) || errors.Is(err, badger.ErrNoRoomToFlush) || errors.Is(err, badger.ErrDiskFull) ||
		errors.Is(err, syscall.EROFS) || errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EIO)
}
