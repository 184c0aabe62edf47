package service

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/deck"
)

// cutOnce is the real engine whose first feed is cut off after its
// first event with the error the engine ends a slow watcher's feed with
// (the engine's own cut-off needs thousands of unread events).
type cutOnce struct {
	deck.Deck
	watches atomic.Int32
}

func (c *cutOnce) Watch(ctx context.Context, from uint64) (deck.Feed, error) {
	inner, err := c.Deck.Watch(ctx, from)
	if err != nil || c.watches.Add(1) > 1 {
		return inner, err
	}
	out := &cutFeed{ch: make(chan deck.Event)}
	go func() {
		defer close(out.ch)
		ev, ok := <-inner.Events()
		if ok {
			out.ch <- ev
		}
		out.err = deck.Errorf(deck.KindFellBehind, "the watcher read the feed too slowly and was cut off; watch again from the last revision it received to resume")
	}()
	return out, nil
}

type cutFeed struct {
	ch  chan deck.Event
	err error
}

func (f *cutFeed) Events() <-chan deck.Event { return f.ch }
func (f *cutFeed) Err() error                { return f.err }

// TestFeedResumesAfterFallingBehind: a feed the owner cuts off because
// its watcher read too slowly reaches the client as KindFellBehind, and
// the client's feed resumes from its last revision on the same owner,
// instead of ending: the next change still arrives, and nothing twice.
func TestFeedResumesAfterFallingBehind(t *testing.T) {
	ctx := t.Context()
	dir, mcp := t.TempDir(), startDemo(t)
	e, err := openEngine(t, dir, mcp.URL)
	if err != nil {
		t.Fatal(err)
	}
	cut := &cutOnce{Deck: e}
	srv, err := Serve(ctx, dir, cut, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		srv.Shutdown(context.Background())
		e.Close()
	})
	first, err := e.Call(ctx, sleepCall(""))
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
	// The owner has cut that first feed off by now; the client watches
	// again from the snapshot's revision.
	waitFor(t, "the client to watch again", 5*time.Second, func() bool { return cut.watches.Load() >= 2 })
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
	if cut.watches.Load() != 2 {
		t.Fatalf("%d watches on the owner, want the first and one resume", cut.watches.Load())
	}
}
