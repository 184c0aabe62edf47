package proxy

import (
	"log/slog"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/deck/decktest"
	"github.com/taskdeck/taskdeck/internal/waitfor"
	"github.com/taskdeck/taskdeck/model"
)

// A slow Watch (a remote Deck) does not hold the hub: a second waiter
// registers while the first one's Watch is under way.
func TestHubWatchOutsideLock(t *testing.T) {
	d := decktest.New(nil)
	h := newHub(d, slog.Default())
	t.Cleanup(h.close)
	release := d.Hold()
	t.Cleanup(release) // before h.close: a failed run does not hang
	first := make(chan error, 1)
	go func() {
		_, stop, err := h.wait("a")
		if err == nil {
			stop()
		}
		first <- err
	}()
	until(t, "the first Watch", func() bool { return len(d.Watches()) == 1 })
	second := make(chan error, 1)
	go func() {
		_, stop, err := h.wait("b")
		if err == nil {
			stop()
		}
		second <- err
	}()
	select {
	case err := <-second:
		if err != nil {
			t.Fatalf("the second waiter: %v", err)
		}
	case <-time.After(waitfor.Scale(2 * time.Second)):
		t.Fatal("the second waiter is held by the first one's Watch")
	}
	release()
	if err := <-first; err != nil {
		t.Fatalf("the first waiter: %v", err)
	}
	if n := len(d.Watches()); n != 1 {
		t.Fatalf("%d Watch calls; want one for both waiters", n)
	}
}

// When the feed ends the hub watches again from the last revision it saw,
// not from 0 (a snapshot of the whole store).
func TestHubResumesFromLastRevision(t *testing.T) {
	d := decktest.New(nil)
	h := newHub(d, slog.Default())
	t.Cleanup(h.close)
	woken, stop, err := h.wait("x")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	d.Put(&model.Task{ID: "x", Status: model.StatusWorking})
	var seen uint64
	until(t, "the hub to see the change", func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		seen = h.from()
		return seen > 0
	})
	d.Cut(deck.Errorf(deck.KindFailed, "the owner went away"))
	select {
	case <-woken:
	case <-time.After(5 * time.Second):
		t.Fatal("the feed's end woke no waiter")
	}
	until(t, "the hub to notice the feed's end", func() bool {
		if err := h.ensure(); err != nil {
			t.Fatal(err)
		}
		return len(d.Watches()) == 2
	})
	if w := d.Watches(); w[0] != 0 || w[1] < seen {
		t.Fatalf("Watch calls from %v; want 0, then at least %d", w, seen)
	}
}
