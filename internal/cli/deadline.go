package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/present"
)

// DeadlineOptions is `taskdeck deadline`, validated.
type DeadlineOptions struct {
	f   *Factory
	ctx context.Context

	ID string    // an id, or a unique prefix of one
	At time.Time // zero: remove the deadline an operator set
}

func newCmdDeadline(f *Factory, runF func(*DeadlineOptions) error) *cobra.Command {
	opts := &DeadlineOptions{f: f}
	return &cobra.Command{
		Use:   "deadline ID (DURATION | TIME | none)",
		Short: "Set when a task waiting for input must be answered by (escalated then: the deadline event)",
		Long: `Set the deadline of the wait for input a task is in, as your act (audited).
At the deadline the engine that watches the task emits the "deadline" event to
the config's notify endpoints, once, and with "onDeadline" in the server's entry
declines the input or cancels the task. It replaces the server's or tool's
configured "deadline" for this wait; "none" removes a deadline you set.`,
		Example: `  taskdeck deadline 06h36fetr0athexq 2h
  taskdeck deadline 06h36fetr0athexq 2026-12-02T17:00:00+01:00
  taskdeck deadline 06h36fetr0athexq none`,
		Args:              cobra.ExactArgs(2),
		ValidArgsFunction: f.completeIDs,
		RunE: func(cmd *cobra.Command, pos []string) error {
			opts.ctx, opts.ID = cmd.Context(), pos[0]
			return runDeadline(opts, pos[1], runF)
		},
	}
}

// runDeadline parses the deadline given and sets it: `deadline` and
// `answer --deadline`.
func runDeadline(opts *DeadlineOptions, deadline string, runF func(*DeadlineOptions) error) error {
	at, err := deck.ParseDeadline(deadline, time.Now())
	if err != nil {
		return err
	}
	opts.At = at
	if runF != nil {
		return runF(opts)
	}
	return deadlineRun(opts)
}

func deadlineRun(opts *DeadlineOptions) error {
	dk, err := opts.f.deck(opts.ctx)
	if err != nil {
		return err
	}
	dd, ok := dk.(deck.Deadliner)
	if !ok {
		return &exitError{code: exitTaskBad, err: fmt.Errorf("this taskdeck cannot set deadlines; restart its owner with this version")}
	}
	rec, err := dd.SetDeadline(opts.ctx, opts.ID, opts.At)
	if err != nil {
		return err
	}
	if opts.At.IsZero() {
		fmt.Fprintf(opts.f.stdout, "task %s: the deadline you set is removed; a configured one holds\n", rec.ID)
		return nil
	}
	fmt.Fprintf(opts.f.stdout, "task %s must be answered by %s (in %s)\n", rec.ID, opts.At.Format(time.RFC3339), present.Age(time.Until(opts.At)))
	return nil
}
