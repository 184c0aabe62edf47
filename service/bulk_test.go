package service

import (
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/model"
)

// CancelMany crosses the socket: one outcome per id in order, a miss
// keeping its kind and id, and the tasks cancelled by the owner.
func TestCancelManyOverTheSocket(t *testing.T) {
	mcp := startDemo(t)
	_, e, _, r := serveEngine(t, mcp)
	ctx := t.Context()
	var ids []string
	for range 3 {
		res, err := r.Call(ctx, sleepCall(""))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.Task.ID)
	}
	errs := r.CancelMany(ctx, []string{ids[0], "zzzzzzzz", ids[1], ids[2]})
	if len(errs) != 4 || errs[0] != nil || errs[2] != nil || errs[3] != nil {
		t.Fatalf("CancelMany over the socket: %v", errs)
	}
	if de := wantKind(t, "a cancel of an unknown id", errs[1], deck.KindNotFound); de.Message == "" {
		t.Fatal("the miss lost its message on the way")
	}
	if got := len(mcp.Requests("tasks/cancel")); got != 3 {
		t.Fatalf("the server got %d tasks/cancel, want 3", got)
	}
	waitFor(t, "the three cancelled", 5*time.Second, func() bool {
		for _, id := range ids {
			if got, err := e.Get(ctx, id); err != nil || got.Task.Status != model.StatusCancelled {
				return false
			}
		}
		return true
	})
}
