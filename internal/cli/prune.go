package cli

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"time"

	"github.com/spf13/cobra"
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
		Use:   "prune",
		Short: "Delete finished tasks (completed, failed, cancelled, unknown)",
		Args:  cobra.NoArgs,
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
	d, err := parseAge(s)
	if err != nil {
		return err
	}
	*a = ageFlag(d)
	return nil
}

// maxDays keeps a count of days far from overflowing a time.Duration.
const maxDays = 100_000

var leadingDays = regexp.MustCompile(`^([0-9]+)d`)

// parseAge reads a non-negative age: a Go duration ("12h", "90m"),
// optionally led by whole days ("3d", "1d12h").
func parseAge(s string) (time.Duration, error) {
	bad := fmt.Errorf("%q is not an age; write it like 3d, 12h, 90m or 1d12h", s)
	var days time.Duration
	if m := leadingDays.FindStringSubmatch(s); m != nil {
		n, err := strconv.Atoi(m[1])
		if err != nil || n > maxDays {
			return 0, bad
		}
		days, s = time.Duration(n)*24*time.Hour, s[len(m[0]):]
		if s == "" {
			return days, nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, bad
	}
	return days + d, nil
}
