package cli

import (
	"context"

	"github.com/spf13/cobra"
)

// GetOptions is `taskdeck get`, validated.
type GetOptions struct {
	f   *Factory
	ctx context.Context

	ID   string // an id, or a unique prefix of one
	JSON bool
}

func newCmdGet(f *Factory, runF func(*GetOptions) error) *cobra.Command {
	opts := &GetOptions{f: f}
	cmd := &cobra.Command{
		Use:               "get ID",
		Short:             "Show one task; an open task is refreshed from its server first",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: f.completeIDs,
		RunE: func(cmd *cobra.Command, pos []string) error {
			opts.ctx, opts.ID = cmd.Context(), pos[0]
			if runF != nil {
				return runF(opts)
			}
			return getRun(opts)
		},
	}
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print a JSON object")
	return cmd
}

func getRun(opts *GetOptions) error {
	f := opts.f
	tr, rec, err := f.task(opts.ID)
	if err != nil {
		return err
	}
	var pollErr error
	if rec.Status.Pollable() {
		res, err := tr.Poll(opts.ctx, rec.ID)
		if err != nil {
			return err
		}
		rec, pollErr = res.Task, res.Err
	}
	if opts.JSON {
		return printJSON(f.stdout, rec)
	}
	printDetail(f.stdout, rec, pollErr)
	return nil
}
