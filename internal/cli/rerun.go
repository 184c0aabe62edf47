package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/model"
)

// RerunOptions is `taskdeck rerun`, validated.
type RerunOptions struct {
	f   *Factory
	ctx context.Context

	IDs  []string // ids or unique prefixes; "-" reads them from stdin
	JSON bool
	bulk
}

func newCmdRerun(f *Factory, runF func(*RerunOptions) error) *cobra.Command {
	opts := &RerunOptions{f: f}
	cmd := &cobra.Command{
		Use:               "rerun (ID... | - | --status S --search Q [--yes])",
		Short:             "Call a failed, cancelled, unknown or orphaned task's tool again with the same arguments",
		Long:              "rerun makes a new call of the task's tool with its arguments, on its server. The new record names the one it repeats (\"repeats\" in --json); the old record stays. Like call, it prints the new task's id.",
		ValidArgsFunction: f.completeIDs,
		RunE: func(cmd *cobra.Command, pos []string) error {
			opts.ctx, opts.IDs = cmd.Context(), pos
			if err := opts.check(pos, "rerun"); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return rerunRun(opts)
		},
	}
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print the new task as a JSON object")
	opts.bulk.flags(cmd)
	return cmd
}

func rerunRun(opts *RerunOptions) error {
	f, ctx := opts.f, opts.ctx
	dk, err := f.deck(ctx)
	if err != nil {
		return err
	}
	ids, err := opts.ids(ctx, f, dk, opts.IDs, "rerun", (*model.Task).Rerunnable)
	if err != nil {
		return err
	}
	inputs := f.inputSource(nil)
	defer f.warnUnasked(inputs)
	return eachID(f, ids, func(_ int, id string) error {
		old, err := dk.Get(ctx, id)
		if err != nil {
			return err
		}
		t := old.Task
		if !t.Rerunnable() {
			return usageErr("task %s is %s: only failed, cancelled, unknown or orphaned tasks are re-run (taskdeck cancel %s stops it first)", t.ID, t.Status, t.ID)
		}
		res, err := dk.Call(ctx, deck.CallRequest{Server: t.Server, Tool: t.Tool, Args: t.Arguments, Repeats: t.ID})
		for err == nil && res.NeedsInput {
			res, err = inputs.beforeStart(ctx, dk, res)
		}
		if err != nil {
			return err
		}
		if opts.JSON {
			return printJSON(f.stdout, res.Task)
		}
		fmt.Fprintln(f.stdout, res.Task.ID)
		return nil
	})
}
