package cli

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v5"

	"github.com/taskdeck/taskdeck/deck"
)

// keepWatched follows the store's feed, dropping its events, for as long
// as ctx lasts, so that every open task stays watched while a watchAll
// command runs. A feed keeps the owner's engine watching: this process's,
// or another's that owned the store when the command started. When that
// owner exits (a short command), the feed fails over to a new owner,
// this process if no other, whose engine then watches; without a feed
// nothing would notice, and nobody would poll until the command's next
// request.
func keepWatched(ctx context.Context, dk deck.Deck, log *slog.Logger) {
	watch := func(ctx context.Context, from uint64) (deck.Feed, error) {
		return dk.WatchWindow(ctx, from, deck.Window{}) // open tasks only
	}
	// Follow calls resume from its own goroutine, and only there (or
	// below, before any Follow runs) is wait used; events since the last
	// end reset it through worked.
	wait := &backoff.ExponentialBackOff{InitialInterval: 250 * time.Millisecond, RandomizationFactor: 0.5, Multiplier: 2, MaxInterval: 10 * time.Second}
	var worked atomic.Bool
	resume := func(ctx context.Context, err error) bool {
		if worked.Swap(false) {
			wait.Reset()
		}
		next := wait.NextBackOff()
		log.Warn("the feed that keeps the open tasks watched ended; following it again", "err", err, "in", next)
		select {
		case <-ctx.Done():
			return false
		case <-time.After(next):
			return true
		}
	}
	for {
		// Follow re-watches, from where it left off, until ctx ends; only
		// its first watch's failure is retried here.
		feed, err := deck.Follow(ctx, 0, watch, resume)
		if err == nil {
			for range feed.Events() {
				worked.Store(true)
			}
			return
		}
		if !resume(ctx, err) {
			return
		}
	}
}
