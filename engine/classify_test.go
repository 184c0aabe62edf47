package engine

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/mcpclient"
	mcpconfig "github.com/taskdeck/taskdeck/mcpclient/config"
	"github.com/taskdeck/taskdeck/mcpclient/wire"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store"
	"github.com/taskdeck/taskdeck/store/badger"
)

// The kinds follow the command line's exit codes: each row is a case its
// exitCode sorted, in the same order of precedence.
func TestClassifyKeepsTheExitCodesOrder(t *testing.T) {
	unreachable := &mcpclient.TransportError{Server: "s", Err: syscall.ECONNREFUSED}
	cases := []struct {
		err  error
		want deck.Kind
	}{
		{&store.LockedError{Dir: "d"}, deck.KindLocked},
		{fmt.Errorf("stopped: %w", context.Canceled), deck.KindCanceled},
		{&mcpclient.TransportError{Server: "s", Err: wire.ErrInvalid}, deck.KindRefused},
		{unreachable, deck.KindUnreachable},
		{context.DeadlineExceeded, deck.KindUnreachable},
		// A refused call joins the server's cause with the store's trouble.
		{errors.Join(unreachable, &store.CorruptError{Dir: "d"}), deck.KindUnreachable},
		{&keyConflictError{Key: "k", Existing: &model.Task{ID: "x"}}, deck.KindConflict},
		{fmt.Errorf("get: %w", store.ErrNotFound), deck.KindNotFound},
		{&mcpconfig.ConfigError{Path: "p", Msg: "m"}, deck.KindUsage},
		{&answerError{Key: "k", Err: errors.New("bad")}, deck.KindUsage},
		{&inputKeyError{TaskID: "t", Key: "k"}, deck.KindUsage},
		{&store.CorruptError{Dir: "d"}, deck.KindLocal},
		{badger.ErrNoRoomToFlush, deck.KindLocal},
		{fmt.Errorf("write: %w", syscall.ENOSPC), deck.KindLocal},
		{fmt.Errorf("write: %w", syscall.EROFS), deck.KindLocal},
		{&mcpclient.ServerError{Code: -32000, Message: "no"}, deck.KindRefused},
		{errors.New("something else"), deck.KindFailed},
	}
	for _, c := range cases {
		err := classify(c.err, "id")
		var de *deck.Error
		if !errors.As(err, &de) || de.Kind != c.want || de.Message != c.err.Error() || de.TaskID != "id" || !errors.Is(err, c.err) {
			t.Errorf("%T %v: got %+v, want kind %s with the message unchanged", c.err, c.err, de, c.want)
		}
	}
	if classify(nil, "id") != nil {
		t.Error("classify(nil) is not nil")
	}
}
