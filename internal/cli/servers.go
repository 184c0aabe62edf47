package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/present"
	"github.com/taskdeck/taskdeck/termtext"
)

// ServersOptions is `taskdeck servers`.
type ServersOptions struct {
	f   *Factory
	ctx context.Context

	JSON bool
}

func newCmdServers(f *Factory, runF func(*ServersOptions) error) *cobra.Command {
	opts := &ServersOptions{f: f}
	cmd := &cobra.Command{
		Use:   "servers",
		Short: "The configured servers: push, open and waiting tasks, failing polls",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.ctx = cmd.Context()
			if runF != nil {
				return runF(opts)
			}
			return serversRun(opts)
		},
	}
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "one JSON object per server")
	return cmd
}

// serverHealth is one server as `servers` reports it: what the deck says
// of it, and what its open tasks say.
type serverHealth struct {
	deck.Server
	Open    int `json:"open"`
	Waiting int `json:"waiting"` // for input
	// Failing counts open tasks whose last poll failed; LastError is the
	// newest such failure.
	Failing   int    `json:"failing"`
	LastError string `json:"lastError,omitempty"`
}

func serversRun(opts *ServersOptions) error {
	f := opts.f
	dk, err := f.deck(opts.ctx)
	if err != nil {
		return err
	}
	servers, err := dk.Servers(opts.ctx)
	if err != nil {
		return err
	}
	if len(servers) == 0 && !opts.JSON {
		fmt.Fprintf(f.stdout, "no servers configured in %s\n", f.configInUse())
		return nil
	}
	open, err := dk.List(opts.ctx, deck.Filter{Groups: []string{"open"}})
	if err != nil {
		return err
	}
	byName := map[string]*serverHealth{}
	health := make([]serverHealth, len(servers))
	for i, s := range servers {
		health[i].Server = s
		byName[s.Name] = &health[i]
	}
	for _, e := range open { // newest first: the first failure seen is the newest
		h := byName[e.Task.Server.Name]
		if h == nil {
			continue // an ad-hoc --url task
		}
		h.Open++
		if e.Task.WaitsForInput() {
			h.Waiting++
		}
		if e.Poll.Errors > 0 {
			if h.Failing == 0 {
				h.LastError = e.Poll.LastError
			}
			h.Failing++
		}
	}
	if opts.JSON {
		for _, h := range health {
			b, err := json.Marshal(h)
			if err != nil {
				return err
			}
			if _, err := f.stdout.Write(append(inertJSON(b), '\n')); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(f.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tTARGET\tOPEN\tWAITING\tPUSH\tPROBLEM")
	for _, h := range health {
		push := h.Push
		if push == "" {
			push = "-"
		}
		problem := h.PushError
		if h.Failing > 0 {
			problem = fmt.Sprintf("%d failing polls, the last: %s", h.Failing, h.LastError)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\n", termtext.OneLine(termtext.Line(h.Name), 24), termtext.Line(h.Target),
			h.Open, h.Waiting, push, termtext.OneLine(termtext.Line(problem), 80))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(health) > 0 && health[0].Retention != nil {
		fmt.Fprintln(f.stdout, present.Retention(*health[0].Retention, func(t time.Time) string { return "at " + t.Local().Format(time.TimeOnly) }))
	}
	return nil
}
