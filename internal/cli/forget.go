package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"github.com/taskdeck/taskdeck/model"
)

// ForgetOptions is `taskdeck forget`, validated.
type ForgetOptions struct {
	f   *Factory
	ctx context.Context

	IDs []string // ids or unique prefixes; "-" reads them from stdin
	bulk
}

func newCmdForget(f *Factory, runF func(*ForgetOptions) error) *cobra.Command {
	opts := &ForgetOptions{f: f}
	cmd := &cobra.Command{
		Use:               "forget (ID... | - | --status S --search Q [--yes])",
		Short:             "Delete tasks' local records without telling their server",
		Example:           `  taskdeck forget --status orphaned --yes`,
		SuggestFor:        []string{"rm", "delete", "remove"},
		ValidArgsFunction: f.completeIDs,
		RunE: func(cmd *cobra.Command, pos []string) error {
			opts.ctx, opts.IDs = cmd.Context(), pos
			if err := opts.check(pos, "forget"); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return forgetRun(opts)
		},
	}
	opts.bulk.flags(cmd)
	return cmd
}

func forgetRun(opts *ForgetOptions) error {
	f, ctx := opts.f, opts.ctx
	dk, err := f.deck(ctx)
	if err != nil {
		return err
	}
	ids, err := opts.ids(ctx, f, dk, opts.IDs, "forget", func(*model.Task) bool { return true })
	if err != nil {
		return err
	}
	return eachID(f, ids, func(_ int, id string) error {
		e, err := dk.Get(ctx, id) // the whole id, to say which task went
		if err != nil {
			return err
		}
		if err := dk.Forget(ctx, e.Task.ID); err != nil {
			return err
		}
		fmt.Fprintf(f.stdout, "forgot task %s\n", e.Task.ID)
		return nil
	})
}
