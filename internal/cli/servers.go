package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/taskdeck/taskdeck/termtext"
)

// ServersOptions is `taskdeck servers`.
type ServersOptions struct {
	f *Factory
}

func newCmdServers(f *Factory, runF func(*ServersOptions) error) *cobra.Command {
	opts := &ServersOptions{f: f}
	return &cobra.Command{
		Use:   "servers",
		Short: "List the configured servers",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if runF != nil {
				return runF(opts)
			}
			return serversRun(opts)
		},
	}
}

func serversRun(opts *ServersOptions) error {
	f := opts.f
	cfg, err := f.config()
	if err != nil {
		return err
	}
	if len(cfg.Names()) == 0 {
		fmt.Fprintf(f.stdout, "no servers configured in %s\n", f.configPath)
		return nil
	}
	for _, name := range cfg.Names() {
		s, _ := cfg.Server(name)
		where := s.URL
		if where == "" {
			where = strings.TrimSpace(s.Command + " " + strings.Join(s.Args, " "))
		}
		fmt.Fprintf(f.stdout, "%-20s %s\n", termtext.Line(name), termtext.Line(where))
	}
	return nil
}
