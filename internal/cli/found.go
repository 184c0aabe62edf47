package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/termtext"
)

// Found tasks: tasks a 2025-11-25 server lists that no record held.
// `reconcile` finds them (serve's and the dashboard's start do too),
// `adopt` and `leave` decide on them; `ls --status found` lists them.

func newCmdReconcile(f *Factory) *cobra.Command {
	return &cobra.Command{
		Use:   "reconcile",
		Short: "Compare the tasks the 2025-11-25 servers list (tasks/list) with the records: orphans resolved, other tasks shown as found",
		Long: `Lists the tasks of every 2025-11-25 server that has an open, orphaned or found record (tasks/list,
at most 100 pages and 10,000 tasks per server), and compares them with the records: an orphan that one
listed task matches is resolved by it; every other listed task no record holds is recorded as found,
for you to adopt (taskdeck adopt) or leave (taskdeck leave). It prints one line per record made.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			dk, err := f.deck(ctx)
			if err != nil {
				return err
			}
			res, err := dk.Reconcile(ctx)
			for _, id := range res.Adopted {
				fmt.Fprintf(f.stdout, "orphan %s resolved by the task its server lists\n", id)
			}
			for _, id := range res.Found {
				e, gerr := dk.Get(ctx, id)
				if gerr != nil {
					return gerr
				}
				fmt.Fprintf(f.stdout, "found %s  %s  task %s: %s\n", id, termtext.Line(e.Task.Server.String()), termtext.Line(e.Task.TaskID), termtext.Line(e.Task.StatusMessage))
			}
			return err
		},
	}
}

// SettleOptions is `taskdeck adopt` or `taskdeck leave`, validated.
type SettleOptions struct {
	f     *Factory
	ctx   context.Context
	adopt bool

	IDs []string // ids or unique prefixes; "-" reads them from stdin
	bulk
}

func newCmdSettle(f *Factory, adopt bool) *cobra.Command {
	opts := &SettleOptions{f: f, adopt: adopt}
	verb, short := "leave", "Leave found tasks to their servers: not watched, not offered again"
	if adopt {
		verb, short = "adopt", "Adopt found tasks: taskdeck watches them and fetches their results"
	}
	cmd := &cobra.Command{
		Use:               verb + " (ID... | - | --status found [--search Q] [--yes])",
		Short:             short,
		Example:           "  taskdeck " + verb + " --status found --yes",
		ValidArgsFunction: f.completeIDs,
		RunE: func(cmd *cobra.Command, pos []string) error {
			opts.ctx, opts.IDs = cmd.Context(), pos
			if err := opts.check(pos, verb); err != nil {
				return err
			}
			return settleRun(opts, verb)
		},
	}
	opts.bulk.flags(cmd)
	return cmd
}

func settleRun(opts *SettleOptions, verb string) error {
	f, ctx := opts.f, opts.ctx
	dk, err := f.deck(ctx)
	if err != nil {
		return err
	}
	ids, err := opts.ids(ctx, f, dk, opts.IDs, verb, func(t *model.Task) bool { return t.Status == model.StatusFound })
	if err != nil {
		return err
	}
	return eachID(f, ids, func(_ int, id string) error {
		t, err := dk.SettleFound(ctx, id, opts.adopt)
		if err != nil {
			return err
		}
		fmt.Fprintf(f.stdout, "%s task %s (server task %s): %s\n", t.Status, t.ID, termtext.Line(t.TaskID), termtext.Line(t.StatusMessage))
		return nil
	})
}
