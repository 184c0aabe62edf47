package engine

import (
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/internal/waitfor"
)

// A watcher that does not read is cut off, never waited for: the engine
// goes on polling, and the watcher can watch again.
func TestSlowWatcherIsCutOffAndResumes(t *testing.T) {
	defer func(n int) { feedBuffer = n }(feedBuffer)
	feedBuffer = 4
	srv := startDemo(t, demo.Options{PollInterval: 5 * time.Millisecond})
	e := open(t, t.TempDir(), srv, Options{})
	ids := launch(t, e, 1)
	ctx := ctxT(t)
	slow, err := e.Watch(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	fast, err := e.Watch(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	// The fast watcher sees polls go on well past the slow one's buffer.
	for range 3 * feedBuffer {
		next(t, fast, 2*time.Second, "a poll", about(ids[0], deck.EventPoll))
	}
	var last deck.Event
	for ev := range slow.Events() {
		last = ev
	}
	err = slow.Err()
	if !errors.Is(err, errFellBehind) || deck.KindOf(err) != deck.KindFellBehind || !strings.Contains(err.Error(), "watch again from the last revision") {
		t.Fatalf("slow feed ended with %v, want it cut off for falling behind", err)
	}
	again, err := e.Watch(ctx, last.Rev)
	if err != nil {
		t.Fatal(err)
	}
	next(t, again, 2*time.Second, "a poll after resuming", about(ids[0], deck.EventPoll))
}

func TestCloseEndsEveryFeed(t *testing.T) {
	srv := startDemo(t, demo.Options{})
	e := open(t, t.TempDir(), srv, Options{})
	f, err := e.Watch(ctxT(t), 0)
	if err != nil {
		t.Fatal(err)
	}
	next(t, f, time.Second, "the snapshot", func(ev deck.Event) bool { return ev.Kind == deck.EventSnapshot })
	done := make(chan struct{})
	go func() {
		for range f.Events() {
		}
		close(done)
	}()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(waitfor.Scale(2 * time.Second)):
		t.Fatal("the feed did not end at Close")
	}
	if deck.KindOf(f.Err()) != deck.KindOwnerGone {
		t.Fatalf("feed ended with %v, want the owner gone", f.Err())
	}
	if _, err := e.Watch(ctxT(t), 0); err == nil {
		t.Fatal("Watch after Close succeeded")
	}
}

// A watcher that comes after the start-up reconcile learns how it went.
func TestLateWatcherHearsTheReconcile(t *testing.T) {
	srv := startDemo(t, demo.Options{PollInterval: time.Hour})
	dir := t.TempDir()
	e := open(t, dir, srv, Options{})
	launch(t, e, 3)
	e.Close()
	e = open(t, dir, srv, Options{})
	ctx := ctxT(t)
	f, err := e.Watch(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	next(t, f, 5*time.Second, "reconcile over", func(ev deck.Event) bool { return ev.Kind == deck.EventReconcile && ev.Reconcile.Over })
	late, err := e.Watch(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	ev := next(t, late, time.Second, "the reconcile", func(ev deck.Event) bool { return ev.Kind == deck.EventReconcile })
	if !ev.Reconcile.Over || ev.Reconcile.Reattached != 3 {
		t.Fatalf("late watcher heard %+v, want the reconcile over with 3 re-attached", *ev.Reconcile)
	}
}

// A watcher costs what it holds, not its buffer's bound: room for events
// is taken as they wait. Each watcher used to take 8,192 events' room (1
// MiB) as it subscribed: at 1,000 open tasks, more than the engine's
// whole memory for them.
func TestWatcherTakesNoRoomUpFront(t *testing.T) {
	srv := startDemo(t, demo.Options{})
	e := open(t, t.TempDir(), srv, Options{})
	ctx := ctxT(t)
	const watchers = 16
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range watchers {
		f, err := e.Watch(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		next(t, f, 5*time.Second, "the snapshot", func(ev deck.Event) bool { return ev.Kind == deck.EventSnapshot })
	}
	runtime.ReadMemStats(&after)
	// Everything this process allocated meanwhile, the engine's
	// background work included: still far under one MiB per watcher.
	if per := (after.TotalAlloc - before.TotalAlloc) / watchers; per > 128<<10 {
		t.Fatalf("a watcher took %d KiB as it subscribed; want at most 128 KiB", per>>10)
	}
}
