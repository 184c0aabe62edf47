package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/taskdeck/taskdeck/mcpclient"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/termtext"
	"github.com/taskdeck/taskdeck/ui/present"
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
			opts.ctx = cmd.Context()
			if runF != nil {
				return runF(opts)
			}
			return watchRun(opts)
		},
	}
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "one JSON object per line for each change")
	cmd.Flags().DurationVar(&opts.Timeout, "timeout", 0, "stop after this long (e.g. 10m) with exit code 7 if tasks are still open; 0: no limit")
	return cmd
}

func watchRun(opts *WatchOptions) error {
	f, ctx := opts.f, opts.ctx
	if opts.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, opts.Timeout)
		defer cancel()
	}
	tr, err := f.open()
	if err != nil {
		return err
	}
	p := f.printer(opts.JSON)
	timedOut := func() error {
		open, err := tr.Store().ByStatus(model.StatusWorking, model.StatusInputRequired)
		if err != nil {
			return err
		}
		n := 0
		for _, t := range open {
			if !t.WaitsForInput() {
				n++
			}
		}
		return &exitError{code: exitTimedOut, err: fmt.Errorf("--timeout %s ran out with %s still open; `taskdeck watch` picks them up again", opts.Timeout, present.Count(n, "task"))}
	}
	rep, err := tr.Reconcile(ctx, mcpclient.DefaultPerServer)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil && opts.ctx.Err() == nil {
			return timedOut()
		}
		return err
	}
	p.report(rep)
	last := map[string]mcpclient.PollResult{}
	var ids []string
	for _, t := range append(rep.Reattached, rep.Unreachable...) {
		if t.Status.Pollable() && !t.WaitsForInput() {
			ids = append(ids, t.ID)
			last[t.ID] = mcpclient.PollResult{Task: t}
		}
	}
	err = tr.Watch(ctx, ids, mcpclient.WatchOptions{MaxFailures: watchGiveUp, OnPoll: func(res mcpclient.PollResult) bool {
		p.poll(res)
		last[res.Task.ID] = res
		return !res.Task.WaitsForInput()
	}})
	if errors.Is(err, context.DeadlineExceeded) && opts.ctx.Err() == nil {
		return timedOut()
	}
	if err != nil {
		return err
	}
	// What is still open was let go after failing every poll.
	var lost []string
	var lastErr error
	for _, id := range ids {
		if res := last[id]; res.Task.Status.Pollable() && !res.Task.WaitsForInput() {
			lost, lastErr = append(lost, id), res.Err
		}
	}
	if len(lost) > 0 {
		return &exitError{code: exitUnreachable, err: fmt.Errorf("gave up on %s (%s) after %d failed polls in a row, the last: %v; they stay open for the next watch",
			present.Count(len(lost), "open task"), strings.Join(lost, ", "), watchGiveUp, termtext.Line(lastErr.Error()))}
	}
	return nil
}
