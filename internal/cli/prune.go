package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	mcpconfig "github.com/taskdeck/taskdeck/mcpclient/config"
	"github.com/taskdeck/taskdeck/present"
)

// PruneOptions is `taskdeck prune`, validated.
type PruneOptions struct {
	f   *Factory
	ctx context.Context

	OlderThan time.Duration // 0: every finished task
}

func newCmdPrune(f *Factory, runF func(*PruneOptions) error) *cobra.Command {
	opts := &PruneOptions{f: f}
	cmd := &cobra.Command{
		Use:        "prune",
		Short:      "Delete finished tasks (completed, failed, cancelled, unknown)",
		SuggestFor: []string{"rm", "delete", "remove", "clean"},
		Args:       cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.ctx = cmd.Context()
			if runF != nil {
				return runF(opts)
			}
			return pruneRun(opts)
		},
	}
	cmd.Flags().Var((*ageFlag)(&opts.OlderThan), "older-than", "only tasks unchanged for this long (e.g. 3d, 12h, 1d12h)")
	return cmd
}

func pruneRun(opts *PruneOptions) error {
	dk, err := opts.f.deck(opts.ctx)
	if err != nil {
		return err
	}
	n, err := dk.Prune(opts.ctx, opts.OlderThan)
	if err != nil {
		return err
	}
	fmt.Fprintf(opts.f.stdout, "pruned %s\n", present.Count(n, "finished task"))
	return nil
}

// ageFlag is a duration flag that also takes whole days ("3d", "1d12h").
type ageFlag time.Duration

func (a *ageFlag) String() string { return time.Duration(*a).String() }
func (a *ageFlag) Type() string   { return "duration" }

func (a *ageFlag) Set(s string) error {
	d, err := mcpconfig.ParseAge(s)
	if err != nil {
		return err
	}
	*a = ageFlag(d)
	return nil
}
