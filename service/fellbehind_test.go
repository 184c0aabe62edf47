package service

import (
	"context"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/deck/decktest"
)

// TestFeedResumesAfterFallingBehind: a feed the owner cuts off because
// its watcher read too slowly reaches the client as KindFellBehind, and
// the client's feed resumes from its last revision on the same owner,
// instead of ending: the next change still arrives, and nothing twice.
// The owner serves an in-memory Deck, cut off after the snapshot with the
// error the engine ends a slow watcher's feed with (the engine's own
// cut-off needs thousands of unread events).
func TestFeedResumesAfterFallingBehind(t *testing.T) {
	ctx := t.Context()
	dir, d := t.TempDir(), decktest.New(nil)
	srv, err := Serve(ctx, dir, d, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	first, err := d.Call(ctx, sleepCall(""))
	if err != nil {
		t.Fatal(err)
	}
	c := open(t, dir, nil)
	feed, err := c.Watch(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	snap := nextOf(t, feed, deck.EventSnapshot)
	if len(snap.Entries) != 1 || snap.Entries[0].Task.ID != first.Task.ID {
		t.Fatalf("the snapshot: %+v, want task %s", snap, first.Task.ID)
	}
	d.Cut(deck.Errorf(deck.KindFellBehind, "the watcher read the feed too slowly and was cut off; watch again from the last revision it received to resume"))
	waitFor(t, "the client to watch again", 5*time.Second, func() bool { return len(d.Watches()) >= 2 })
	second, err := c.Call(ctx, sleepCall(""))
	if err != nil {
		t.Fatal(err)
	}
	for {
		ev := nextOf(t, feed, deck.EventChange, deck.EventSnapshot)
		if ev.Kind == deck.EventSnapshot || ev.Rev <= snap.Rev {
			t.Fatalf("after the cut-off the feed sent %s at rev %d, want only changes after rev %d", ev.Kind, ev.Rev, snap.Rev)
		}
		if ev.Entries[0].Task.ID == second.Task.ID {
			break
		}
	}
	if w := d.Watches(); len(w) != 2 || w[1] != snap.Rev {
		t.Fatalf("watches on the owner from %v, want the first and one resume from rev %d", w, snap.Rev)
	}
}
