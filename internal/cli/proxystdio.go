package cli

import (
	"context"
	"os"
	"slices"

	"github.com/spf13/cobra"

	"github.com/taskdeck/taskdeck/engine"
	mcpconfig "github.com/taskdeck/taskdeck/mcpclient/config"
	"github.com/taskdeck/taskdeck/proxy"
	"github.com/taskdeck/taskdeck/store"
)

// ProxyOptions is `taskdeck proxy --stdio NAME`.
type ProxyOptions struct {
	f      *Factory
	ctx    context.Context
	Server string
	// Agent names the agent principal the proxy serves.
	Agent string
}

func newCmdProxy(f *Factory, runF func(*ProxyOptions) error) *cobra.Command {
	opts := &ProxyOptions{f: f}
	var stdio string
	cmd := &cobra.Command{
		Use:   "proxy --stdio NAME",
		Short: "Serve one configured server to an MCP agent on stdin/stdout, every task recorded",
		Long: `proxy --stdio NAME is the command an agent launches instead of an MCP
server: it speaks MCP on stdin and stdout and reaches the configured server
NAME through taskdeck, so every task the agent starts is recorded before the
agent hears of it, and agents without the tasks extension are held until
the task ends. It works through the owner of the store when one runs.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.ctx = cmd.Context()
			if stdio == "" {
				return usageErr("name the server the agent reaches: taskdeck proxy --stdio NAME")
			}
			cfg, err := f.config()
			if err != nil {
				return err
			}
			if _, err := cfg.Server(stdio); err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			if a, ok := cfg.Agents[opts.Agent]; ok && !slices.Contains(a.Servers, stdio) {
				return usageErr("agent %q may not use server %q: add it to the agent's \"servers\" in the config", opts.Agent, stdio)
			}
			if opts.Agent != "" && !mcpconfig.ValidAgentName(opts.Agent) {
				return usageErr("--agent %q: an agent name is letters, digits, - and _", opts.Agent)
			}
			opts.Server = stdio
			if runF != nil {
				return runF(opts)
			}
			return proxyRun(opts)
		},
	}
	cmd.Flags().StringVar(&stdio, "stdio", "", "the configured server NAME the agent reaches")
	cmd.Flags().StringVar(&opts.Agent, "agent", "", "the agent's name: its tasks are its own, and its \"agents\" entry, if any, says which servers it may use (default: your user name)")
	cmd.RegisterFlagCompletionFunc("stdio", f.completeServers)
	return cmd
}

func proxyRun(opts *ProxyOptions) error {
	f := opts.f
	f.quiet = true // stdout is the agent's: warnings go to the log
	// An agent's tasks are watched to their end while it runs, also when
	// no serve does: a task the agent leaves behind is not left unpolled.
	f.watchAll = true
	dk, err := f.deck(opts.ctx)
	if err != nil {
		return err
	}
	// The owner made the key when it opened the store: the same tags as
	// its own proxy's.
	dir := f.dataDir
	if engine.IsPostgres(f.storeOf(f.cfg)) {
		dir = ""
	}
	key, err := store.LoadAuditKey(dir)
	if err != nil {
		return &exitError{code: exitUsage, err: err}
	}
	p := proxy.New(proxy.Options{Deck: dk, Config: f.cfg, Logger: f.logger.With("component", "proxy"), Agent: opts.Agent,
		HandleKey: proxy.HandleKeyFrom(key)})
	defer p.Close()
	err = p.ServeStdio(opts.ctx, opts.Server, os.Stdin, os.Stdout)
	if opts.ctx.Err() != nil {
		return nil // the agent or a signal ended it
	}
	return err
}
