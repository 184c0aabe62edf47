package cli

import (
	"context"
	"time"

	"github.com/spf13/cobra"
	"github.com/taskdeck/taskdeck/deck"
)

// LsOptions is `taskdeck ls`, validated.
type LsOptions struct {
	f   *Factory
	ctx context.Context

	filter     // empty: every record
	Limit  int // 0: every record the filter admits
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
			if opts.Limit < 0 {
				return usageErr("--limit %d: give how many of the newest tasks to list (0: every one)", opts.Limit)
			}
			if runF != nil {
				return runF(opts)
			}
			return lsRun(opts)
		},
	}
	opts.filter.flags(cmd)
	cmd.Flags().IntVarP(&opts.Limit, "limit", "n", 0, "list only the newest N tasks the other flags select (0: every one)")
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "one JSON object per line")
	return cmd
}

func lsRun(opts *LsOptions) error {
	f := opts.f
	dk, err := f.deck(opts.ctx)
	if err != nil {
		return err
	}
	emit := func(page []deck.Entry, _ bool) error {
		for _, e := range page {
			if err := printEntryJSON(f.stdout, e); err != nil {
				return err
			}
		}
		return nil
	}
	var table *taskTable
	if !opts.JSON {
		table = &taskTable{w: f.stdout, configured: configured(opts.ctx, dk), now: time.Now()}
		emit = table.page
	}
	if _, err := opts.pages(opts.ctx, dk, opts.Limit, emit); err != nil { // newest first, as the dashboard
		return err
	}
	if table != nil {
		return table.end()
	}
	return nil
}
