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

// deadlineLayouts are the times `deadline` reads besides RFC 3339: a
// local date and time.
var deadlineLayouts = []string{"2006-01-02T15:04", "2006-01-02 15:04"}

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
			at, err := parseDeadline(pos[1], time.Now())
			if err != nil {
				return err
			}
			opts.At = at
			if runF != nil {
				return runF(opts)
			}
			return deadlineRun(opts)
		},
	}
}

// parseDeadline reads a duration from now, a time, or "none" (zero); a
// time not after now is refused.
func parseDeadline(s string, now time.Time) (time.Time, error) {
	if s == "none" {
		return time.Time{}, nil
	}
	at, ok := time.Time{}, false
	if d, err := time.ParseDuration(s); err == nil {
		at, ok = now.Add(d), true
	} else if t, err := time.Parse(time.RFC3339, s); err == nil {
		at, ok = t, true
	} else {
		for _, layout := range deadlineLayouts {
			if t, err := time.ParseInLocation(layout, s, time.Local); err == nil {
				at, ok = t, true
				break
			}
		}
	}
	if !ok {
		return at, usageErr("deadline %q: want a duration such as 2h or 30m, a time such as 2026-12-02T17:00:00Z or \"2026-12-02 17:00\" (local), or none", s)
	}
	if !at.After(now) {
		return at, usageErr("deadline %s is in the past; give a later time or a positive duration such as 2h", at.Format(time.RFC3339))
	}
	return at, nil
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
