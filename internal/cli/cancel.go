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
	dk, err := opts.f.deck(opts.ctx)
	if err != nil {
		return err
	}
	// The deck polls the task once after the cancel: it tells whether the
	// server has already stopped it.
	rec, err := dk.Cancel(opts.ctx, opts.ID)
	if err != nil {
		return err
	}
	fmt.Fprintf(opts.f.stdout, "cancel sent; task %s is %s\n", rec.ID, rec.Status)
	return nil
}
