package service

import (
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/model"
)

// CancelMany through Open's Client, as the dashboard calls it: from a
// client of the owner (over the socket) and from the owner itself, one
// outcome per id in order, a miss keeping its kind and message, and the
// tasks cancelled.
func TestCancelManyThroughOpen(t *testing.T) {
	ctx := t.Context()
	dir, mcp := t.TempDir(), startDemo(t)
	owner := open(t, dir, own(t, dir, mcp.URL))
	client := open(t, dir, own(t, dir, mcp.URL))
	if !owner.Owner() || client.Owner() {
		t.Fatal("want one owner and one client of it")
	}
	var ids []string
	for range 4 {
		res, err := client.Call(ctx, sleepCall(""))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.Task.ID)
	}
	for _, c := range []struct {
		who string
		d   *Client
		ids []string
	}{{"the client", client, ids[:2]}, {"the owner", owner, ids[2:]}} {
		errs := c.d.CancelMany(ctx, []string{c.ids[0], "zzzzzzzz", c.ids[1]})
		if len(errs) != 3 || errs[0] != nil || errs[2] != nil {
			t.Fatalf("CancelMany from %s: %v", c.who, errs)
		}
		if de := wantKind(t, "a cancel of an unknown id from "+c.who, errs[1], deck.KindNotFound); de.Message == "" {
			t.Fatalf("the miss lost its message from %s", c.who)
		}
	}
	if got := len(mcp.Requests("tasks/cancel")); got != len(ids) {
		t.Fatalf("the server got %d tasks/cancel, want %d", got, len(ids))
	}
	waitFor(t, "the four cancelled", 5*time.Second, func() bool {
		for _, id := range ids {
			if got, err := owner.Get(ctx, id); err != nil || got.Task.Status != model.StatusCancelled {
				return false
			}
		}
		return true
	})
}
