package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
)

// ForgetOptions is `taskdeck forget`, validated.
type ForgetOptions struct {
	f   *Factory
	ctx context.Context

	ID string // an id, or a unique prefix of one
}

func newCmdForget(f *Factory, runF func(*ForgetOptions) error) *cobra.Command {
	opts := &ForgetOptions{f: f}
	return &cobra.Command{
		Use:               "forget ID",
		Short:             "Delete a task's local record without telling its server",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: f.completeIDs,
		RunE: func(cmd *cobra.Command, pos []string) error {
			opts.ctx, opts.ID = cmd.Context(), pos[0]
			if runF != nil {
				return runF(opts)
			}
			return forgetRun(opts)
		},
	}
}

func forgetRun(opts *ForgetOptions) error {
	dk, err := opts.f.deck(opts.ctx)
	if err != nil {
		return err
	}
	e, err := dk.Get(opts.ctx, opts.ID) // the whole id, to say which task went
	if err != nil {
		return err
	}
	if err := dk.Forget(opts.ctx, e.Task.ID); err != nil {
		return err
	}
	fmt.Fprintf(opts.f.stdout, "forgot task %s\n", e.Task.ID)
	return nil
}
