package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
)

// CancelOptions is `taskdeck cancel`, validated.
type CancelOptions struct {
	f   *Factory
	ctx context.Context

	ID string // an id, or a unique prefix of one
}

func newCmdCancel(f *Factory, runF func(*CancelOptions) error) *cobra.Command {
	opts := &CancelOptions{f: f}
	return &cobra.Command{
		Use:               "cancel ID",
		Short:             "Ask the server to cancel a task (tasks/cancel)",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: f.completeIDs,
		RunE: func(cmd *cobra.Command, pos []string) error {
			opts.ctx, opts.ID = cmd.Context(), pos[0]
			if runF != nil {
				return runF(opts)
			}
			return cancelRun(opts)
		},
	}
}

func cancelRun(opts *CancelOptions) error {
	tr, rec, err := opts.f.task(opts.ID)
	if err != nil {
		return err
	}
	if _, err := tr.Cancel(opts.ctx, rec.ID); err != nil {
		return err
	}
	// One poll tells whether the server has already stopped it.
	res, err := tr.Poll(opts.ctx, rec.ID)
	if err != nil {
		return err
	}
	fmt.Fprintf(opts.f.stdout, "cancel sent; task %s is %s\n", rec.ID, res.Task.Status)
	return nil
}
