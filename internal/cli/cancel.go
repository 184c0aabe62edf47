package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"github.com/taskdeck/taskdeck/model"
)

// CancelOptions is `taskdeck cancel`, validated.
type CancelOptions struct {
	f   *Factory
	ctx context.Context

	IDs []string // ids or unique prefixes; "-" reads them from stdin
	bulk
}

func newCmdCancel(f *Factory, runF func(*CancelOptions) error) *cobra.Command {
	opts := &CancelOptions{f: f}
	cmd := &cobra.Command{
		Use:        "cancel (ID... | - | --status S --search Q [--yes])",
		Short:      "Ask the server to cancel tasks (tasks/cancel)",
		SuggestFor: []string{"stop", "kill", "abort"},
		Example: `  taskdeck cancel 06h36fetr0athexq
  taskdeck cancel --search 'tool:backfill' --status open --yes
  taskdeck ls --status problems | taskdeck cancel -`,
		ValidArgsFunction: f.completeIDs,
		RunE: func(cmd *cobra.Command, pos []string) error {
			opts.ctx, opts.IDs = cmd.Context(), pos
			if err := opts.check(pos, "cancel"); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return cancelRun(opts)
		},
	}
	opts.bulk.flags(cmd)
	return cmd
}

func cancelRun(opts *CancelOptions) error {
	f, ctx := opts.f, opts.ctx
	dk, err := f.deck(ctx)
	if err != nil {
		return err
	}
	ids, err := opts.ids(ctx, f, dk, opts.IDs, "cancel", (*model.Task).Pollable)
	if err != nil || len(ids) == 0 {
		return err
	}
	if len(ids) == 1 {
		// The deck polls the task once after the cancel: it tells whether
		// the server has already stopped it.
		rec, err := dk.Cancel(ctx, ids[0])
		if err != nil {
			return err
		}
		fmt.Fprintf(f.stdout, "cancel sent; task %s is %s\n", rec.ID, rec.Status)
		return nil
	}
	// Many at once: a bounded number per server, the outcomes on the feed.
	errs := dk.CancelMany(ctx, ids)
	return eachID(f, ids, func(i int, id string) error {
		if errs[i] != nil {
			return errs[i]
		}
		fmt.Fprintf(f.stdout, "cancel sent to task %s\n", id)
		return nil
	})
}
