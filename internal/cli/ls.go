package cli

import (
	"context"
	"time"

	"github.com/spf13/cobra"
)

// LsOptions is `taskdeck ls`, validated.
type LsOptions struct {
	f   *Factory
	ctx context.Context

	filter // empty: every record
	JSON   bool
}

func newCmdLs(f *Factory, runF func(*LsOptions) error) *cobra.Command {
	opts := &LsOptions{f: f}
	cmd := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List tasks from the store (no network)",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.ctx = cmd.Context()
			if err := opts.parse(); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return lsRun(opts)
		},
	}
	opts.filter.flags(cmd)
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "one JSON object per line")
	return cmd
}

func lsRun(opts *LsOptions) error {
	f := opts.f
	dk, err := f.deck(opts.ctx)
	if err != nil {
		return err
	}
	shown, err := opts.find(opts.ctx, dk) // newest first, as the dashboard
	if err != nil {
		return err
	}
	if opts.JSON {
		for _, e := range shown {
			if err := printEntryJSON(f.stdout, e); err != nil {
				return err
			}
		}
		return nil
	}
	printTable(f.stdout, shown, configured(opts.ctx, dk), time.Now())
	return nil
}
