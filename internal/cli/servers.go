package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"github.com/taskdeck/taskdeck/termtext"
)

// ServersOptions is `taskdeck servers`.
type ServersOptions struct {
	f   *Factory
	ctx context.Context
}

func newCmdServers(f *Factory, runF func(*ServersOptions) error) *cobra.Command {
	opts := &ServersOptions{f: f}
	return &cobra.Command{
		Use:   "servers",
		Short: "List the configured servers",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.ctx = cmd.Context()
			if runF != nil {
				return runF(opts)
			}
			return serversRun(opts)
		},
	}
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
	if len(servers) == 0 {
		fmt.Fprintf(f.stdout, "no servers configured in %s\n", f.configPath)
		return nil
	}
	for _, s := range servers {
		fmt.Fprintf(f.stdout, "%-20s %s\n", termtext.Line(s.Name), termtext.Line(s.Target))
	}
	return nil
}
