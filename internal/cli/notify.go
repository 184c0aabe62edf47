package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/taskdeck"
	"github.com/taskdeck/taskdeck/termtext"
)

// NotifyOptions is `taskdeck notify status`.
type NotifyOptions struct {
	f   *Factory
	ctx context.Context

	JSON bool
}

func newCmdNotify(f *Factory, runF func(*NotifyOptions) error) *cobra.Command {
	opts := &NotifyOptions{f: f}
	cmd := &cobra.Command{
		Use:   "notify",
		Short: "The config's \"notify\" endpoints: webhooks and command hooks told of task events",
		Args:  cobra.NoArgs,
	}
	status := &cobra.Command{
		Use:   "status",
		Short: "Per endpoint: events delivered, pending, expired, and the last error while failing",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.ctx = cmd.Context()
			if runF != nil {
				return runF(opts)
			}
			return notifyStatusRun(opts)
		},
	}
	status.Flags().BoolVar(&opts.JSON, "json", false, "one JSON object per endpoint")
	cmd.AddCommand(status)
	return cmd
}

func notifyStatusRun(opts *NotifyOptions) error {
	f := opts.f
	dk, err := f.deck(opts.ctx)
	if err != nil {
		return err
	}
	if td, ok := dk.(*taskdeck.Deck); ok {
		dk = td.Deck // the engine, or the owner's socket
	}
	nd, ok := dk.(deck.Notifier)
	if !ok {
		return &exitError{code: exitTaskBad, err: fmt.Errorf("the taskdeck that owns the store cannot report its notifications; restart it with this version")}
	}
	eps, err := nd.NotifyStatus(opts.ctx)
	if err != nil {
		return err
	}
	if opts.JSON {
		for _, ep := range eps {
			b, err := json.Marshal(ep)
			if err != nil {
				return err
			}
			if _, err := f.stdout.Write(append(inertJSON(b), '\n')); err != nil {
				return err
			}
		}
		return nil
	}
	if len(eps) == 0 {
		fmt.Fprintf(f.stdout, "no notify endpoints configured in %s\n", f.configInUse())
		return nil
	}
	tw := tabwriter.NewWriter(f.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tTARGET\tEVENTS\tDELIVERED\tPENDING\tEXPIRED\tSTATE")
	for _, ep := range eps {
		state := "ok"
		switch {
		case ep.Failing:
			state = "failing since " + ep.LastErrorAt.Local().Format(time.TimeOnly) + ": " + ep.LastError
		case ep.Delivered == 0 && ep.Pending == 0:
			state = "-"
		}
		kind := ep.Kind
		if kind == "" {
			kind = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%s\n", kind, termtext.OneLine(termtext.Line(ep.Target), 48),
			strings.Join(ep.Events, ","), ep.Delivered, ep.Pending, ep.Expired, termtext.OneLine(termtext.Line(state), 100))
	}
	return tw.Flush()
}
