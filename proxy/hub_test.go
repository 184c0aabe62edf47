package proxy

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/demo"
)

// watchDeck is the real engine, with its WatchWindow calls seen: where
// each starts from, held at gate (if set), and endable by the test.
type watchDeck struct {
	deck.Deck
	gate chan struct{}

	mu    sync.Mutex
	froms []uint64
	end   context.CancelFunc
}

func (d *watchDeck) WatchWindow(ctx context.Context, from uint64, w deck.Window) (deck.Feed, error) {
	d.mu.Lock()
	d.froms = append(d.froms, from)
	d.mu.Unlock()
	if d.gate != nil {
		select {
		case <-d.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	ctx, end := context.WithCancel(ctx)
	d.mu.Lock()
	d.end = end
	d.mu.Unlock()
	return d.Deck.WatchWindow(ctx, from, w)
}

func (d *watchDeck) watches() []uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]uint64(nil), d.froms...)
}

// A slow Watch (a remote Deck) does not hold the hub: a second waiter
// registers while the first one's Watch is under way.
func TestHubWatchOutsideLock(t *testing.T) {
	r := startRig(t, demo.Options{}, Options{})
	d := &watchDeck{Deck: r.eng, gate: make(chan struct{})}
	h := newHub(d, slog.Default())
	t.Cleanup(h.close)
	var open sync.Once
	release := func() { open.Do(func() { close(d.gate) }) }
	t.Cleanup(release) // before h.close: a failed run does not hang
	first := make(chan error, 1)
	go func() {
		_, stop, err := h.wait("a")
		if err == nil {
			stop()
		}
		first <- err
	}()
	until(t, "the first Watch", func() bool { return len(d.watches()) == 1 })
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
	case <-time.After(2 * time.Second):
		t.Fatal("the second waiter is held by the first one's Watch")
	}
	release()
	if err := <-first; err != nil {
		t.Fatalf("the first waiter: %v", err)
	}
	if n := len(d.watches()); n != 1 {
		t.Fatalf("%d Watch calls; want one for both waiters", n)
	}
}

// When the feed ends the hub watches again from the last revision it saw,
// not from 0 (a snapshot of the whole store).
func TestHubResumesFromLastRevision(t *testing.T) {
	r := startRig(t, demo.Options{}, Options{})
	d := &watchDeck{Deck: r.eng}
	h := newHub(d, slog.Default())
	t.Cleanup(h.close)
	woken, stop, err := h.wait("x")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	cs := goClient(t, r.url, "go-agent")
	if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "sleep", Arguments: map[string]any{"seconds": 1}}); err != nil {
		t.Fatal(err)
	}
	var seen uint64
	until(t, "the hub to see the call's changes", func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		seen = h.from()
		return seen > 0
	})
	d.mu.Lock()
	d.end()
	d.mu.Unlock()
	select {
	case <-woken:
	case <-time.After(5 * time.Second):
		t.Fatal("the feed's end woke no waiter")
	}
	until(t, "the hub to notice the feed's end", func() bool {
		if err := h.ensure(); err != nil {
			t.Fatal(err)
		}
		return len(d.watches()) == 2
	})
	if w := d.watches(); w[0] != 0 || w[1] < seen {
		t.Fatalf("Watch calls from %v; want 0, then at least %d", w, seen)
	}
}
