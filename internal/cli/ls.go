package cli

import (
	"context"
	"slices"
	"time"

	"github.com/spf13/cobra"
	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/internal/search"
	"github.com/taskdeck/taskdeck/model"
)

// LsOptions is `taskdeck ls`, validated.
type LsOptions struct {
	f   *Factory
	ctx context.Context

	Status []model.Status // empty with Groups: every status
	Groups []string       // status groups (deck.Groups): open, waiting, finished, problems
	Search string         // the dashboard's search: words and tool:, server:, status:, args: terms
	JSON   bool
}

func newCmdLs(f *Factory, runF func(*LsOptions) error) *cobra.Command {
	opts := &LsOptions{f: f}
	var status string
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List tasks from the store (no network)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.ctx = cmd.Context()
			if status != "" {
				st, groups, err := deck.ParseStatuses(status)
				if err != nil {
					return usageErr("--status: %v", err)
				}
				opts.Status = st
				for _, g := range groups {
					opts.Groups = append(opts.Groups, g.Name)
				}
			}
			if runF != nil {
				return runF(opts)
			}
			return lsRun(opts)
		},
	}
	cmd.Flags().StringVar(&status, "status", "", "only tasks with this status or in this group (open, waiting, finished, problems); several separated by commas")
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "one JSON object per line")
	cmd.Flags().StringVar(&opts.Search, "search", "", "only tasks the dashboard's search finds: words, and tool:X server:X status:X args:X result:X terms; -term excludes")
	cmd.RegisterFlagCompletionFunc("status", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		var names []string
		for _, s := range model.AllStatuses {
			names = append(names, string(s))
		}
		for _, g := range deck.Groups {
			names = append(names, g.Name)
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	})
	return cmd
}

func lsRun(opts *LsOptions) error {
	f := opts.f
	dk, err := f.deck(opts.ctx)
	if err != nil {
		return err
	}
	entries, err := dk.List(opts.ctx, deck.Filter{Statuses: opts.Status, Groups: opts.Groups})
	if err != nil {
		return err
	}
	q := search.Parse(opts.Search)
	var shown []deck.Entry
	for _, e := range slices.Backward(entries) { // newest last
		if x := search.Of(e.Task, e.Task.StatusMessage); q.Match(&x) {
			shown = append(shown, e)
		}
	}
	if opts.JSON {
		for _, e := range shown {
			if err := printEntryJSON(f.stdout, e); err != nil {
				return err
			}
		}
		return nil
	}
	printTable(f.stdout, shown, time.Now())
	return nil
}
