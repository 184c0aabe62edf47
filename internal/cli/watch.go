package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/present"
	"github.com/taskdeck/taskdeck/termtext"
)

// watchGiveUp is how many failed polls in a row make watch let a task go
// (about a minute under the default policy): a server that is down, or
// answers nothing usable, cannot hold a watch forever.
const watchGiveUp = 5

// WatchOptions is `taskdeck watch`, validated.
type WatchOptions struct {
	f   *Factory
	ctx context.Context

	JSON    bool
	Timeout time.Duration // 0: no limit
	// Notify: tell a person of what needs them, until interrupted.
	Notify bool
}

func newCmdWatch(f *Factory, runF func(*WatchOptions) error) *cobra.Command {
	opts := &WatchOptions{f: f}
	cmd := &cobra.Command{
		Use:   "watch",
		Short: "Reconcile, then poll every open task until each has ended, waits for input, or cannot be reached",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.Timeout < 0 {
				return usageErr("--timeout must not be negative (0 waits as long as it takes)")
			}
			if opts.Notify && opts.JSON {
				return usageErr("--notify prints lines for a person; use --json without it")
			}
			opts.ctx = cmd.Context()
			if runF != nil {
				return runF(opts)
			}
			if opts.Notify {
				return notifyRun(opts)
			}
			return watchRun(opts)
		},
	}
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "one JSON object per line for each change")
	cmd.Flags().DurationVar(&opts.Timeout, "timeout", 0, "stop after this long (e.g. 10m) with exit code 7 if tasks are still open (with --notify: exit 0); 0: no limit")
	cmd.Flags().BoolVar(&opts.Notify, "notify", false, "until interrupted, one line per task that needs a person (waits for input, failed, orphaned); on a terminal also the bell and a desktop notification (OSC 9, or OSC 777)")
	return cmd
}

// watchContext is the watch's context: the command's, ended by --timeout.
func (opts *WatchOptions) watchContext() (context.Context, context.CancelFunc) {
	if opts.Timeout > 0 {
		return context.WithTimeout(opts.ctx, opts.Timeout)
	}
	return context.WithCancel(opts.ctx)
}

func watchRun(opts *WatchOptions) error {
	f := opts.f
	ctx, cancel := opts.watchContext()
	defer cancel()
	dk, err := f.deck(opts.ctx)
	if err != nil {
		return err
	}
	// The timeout ends the watch wherever it is, even before the feed's
	// first event: that is a timeout (7), not an interruption (130).
	timedOut := func() bool { return errors.Is(ctx.Err(), context.DeadlineExceeded) && opts.ctx.Err() == nil }
	w := &watcher{p: f.printer(opts.JSON), current: map[string]deck.Entry{}}
	// The open records and what changes: finished ones are not followed,
	// and a store's years of them would only slow the start.
	feed, err := dk.WatchWindow(ctx, 0, deck.Window{})
	if err != nil {
		if timedOut() {
			return w.timedOut(opts, dk)
		}
		return err
	}
	for ev := range feed.Events() {
		if w.event(ev) {
			return w.lost()
		}
	}
	switch {
	case timedOut():
		return w.timedOut(opts, dk)
	case feed.Err() != nil:
		return feed.Err()
	}
	return ctx.Err()
}

// timedOut is the exit of a watch whose --timeout ran out. Open tasks are
// counted from the feed once its snapshot came, else asked for.
func (w *watcher) timedOut(opts *WatchOptions, dk deck.Deck) error {
	n := 0
	if w.sawSnapshot {
		for _, e := range w.current {
			if e.Task.Pollable() && !e.Task.WaitsForInput() {
				n++
			}
		}
	} else {
		open, err := dk.List(opts.ctx, deck.Filter{Statuses: []model.Status{model.StatusWorking, model.StatusInputRequired}})
		if err != nil {
			return err
		}
		for _, e := range open {
			if e.Task.Pollable() && !e.Task.WaitsForInput() {
				n++
			}
		}
	}
	return &exitError{code: exitTimedOut, err: fmt.Errorf("--timeout %s ran out with %s still open; `taskdeck watch` picks them up again", opts.Timeout, present.Count(n, "task"))}
}

// watcher follows the tasks open at start through the feed: after the
// start-up reconcile it prints what it found, then every change of those
// tasks until each has ended, waits for input, or was let go after
// watchGiveUp failed polls in a row.
type watcher struct {
	p       *printer
	current map[string]deck.Entry // every record heard of, as last heard
	atStart []string              // the tasks open when the watch began, and the orphans
	follow  map[string]bool       // nil until the reconcile is over

	sawSnapshot bool // the snapshot's last part is in
}

// event takes one event; it reports whether the watch is over.
func (w *watcher) event(ev deck.Event) bool {
	for _, id := range ev.Deleted {
		delete(w.current, id)
		delete(w.follow, id)
	}
	snapshot := ev.Kind == deck.EventSnapshot || ev.Kind == deck.EventSnapshotMore
	if snapshot && !ev.More {
		w.sawSnapshot = true
	}
	for _, e := range ev.Entries {
		_, heard := w.current[e.Task.ID]
		w.current[e.Task.ID] = e
		// A snapshot's later parts are read as they are sent: a task open
		// at its start that ended before its part was read is in none, and
		// its change, after the last part, says what it was.
		wasOpen := snapshot && openAtStart(e.Task.Status) ||
			ev.Kind == deck.EventChange && w.follow == nil && !heard && openAtStart(ev.Prev)
		if wasOpen {
			w.atStart = append(w.atStart, e.Task.ID)
		}
		if w.follow[e.Task.ID] {
			w.p.entry(e)
		}
	}
	if ev.Kind == deck.EventStore {
		w.p.store(*ev.Store)
	}
	if ev.Kind == deck.EventReconcile && ev.Reconcile.Over && w.follow == nil {
		// The report first, then what it found.
		w.p.reconcile(ev.Reconcile)
		w.follow = map[string]bool{}
		for _, id := range w.atStart {
			if e, ok := w.current[id]; ok {
				w.p.change(e.Task)
				w.follow[id] = e.Task.Pollable()
			}
		}
	}
	if w.follow == nil {
		return false
	}
	for id, on := range w.follow {
		if e := w.current[id]; on && (!e.Task.Pollable() || e.Task.WaitsForInput()) {
			w.follow[id] = false
		}
	}
	for id, on := range w.follow {
		if on && w.current[id].Poll.Errors < watchGiveUp {
			return false
		}
	}
	return true
}

// openAtStart tells the statuses a watch follows, or reports, from its
// start.
func openAtStart(s model.Status) bool { return s.Pollable() || s == model.StatusOrphaned }

// lost is the exit of a watch whose every followed task ended or waits,
// or 3 when some were let go after their polls kept failing.
func (w *watcher) lost() error {
	var lost []string
	var lastErr string
	for _, id := range w.atStart {
		if w.follow[id] {
			lost, lastErr = append(lost, id), w.current[id].Poll.LastError
		}
	}
	if len(lost) == 0 {
		return nil
	}
	return &exitError{code: exitUnreachable, err: fmt.Errorf("gave up on %s (%s) after %d failed polls in a row, the last: %v; they stay open for the next watch",
		present.Count(len(lost), "open task"), strings.Join(lost, ", "), watchGiveUp, termtext.Line(lastErr))}
}
