package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

// ForgetOptions is `taskdeck forget`, validated.
type ForgetOptions struct {
	f *Factory

	ID string // an id, or a unique prefix of one
}

func newCmdForget(f *Factory, runF func(*ForgetOptions) error) *cobra.Command {
	opts := &ForgetOptions{f: f}
	return &cobra.Command{
		Use:               "forget ID",
		Short:             "Delete a task's local record without telling its server",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: f.completeIDs,
		RunE: func(_ *cobra.Command, pos []string) error {
			opts.ID = pos[0]
			if runF != nil {
				return runF(opts)
			}
			return forgetRun(opts)
		},
	}
}

func forgetRun(opts *ForgetOptions) error {
	tr, rec, err := opts.f.task(opts.ID)
	if err != nil {
		return err
	}
	if err := tr.Forget(rec.ID); err != nil {
		return err
	}
	fmt.Fprintf(opts.f.stdout, "forgot task %s\n", rec.ID)
	return nil
}
