package cli

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/spf13/cobra"
	mcpconfig "github.com/taskdeck/taskdeck/mcpclient/config"
)

// AgentAddOptions is `taskdeck agent add NAME [--server S]...`.
type AgentAddOptions struct {
	f       *Factory
	Name    string
	Servers []string
	Proxy   string // the proxy's address, for the agent's side
}

func newCmdAgent(f *Factory, runF func(*AgentAddOptions) error) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Give an MCP agent its own token at the proxy",
		Args:  cobra.NoArgs,
	}
	opts := &AgentAddOptions{f: f}
	add := &cobra.Command{
		Use:   "add NAME [--server S]...",
		Short: "Make a random token for agent NAME and print the config it needs",
		Long: `agent add NAME makes a random token for the agent NAME and prints what
goes where: the environment line for taskdeck serve, the block for the
"agents" of taskdeck's config (the token stays in the environment, as
${VAR}), and the agent's own server entry with its Authorization header.
It writes nothing: not the config, not the store.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Name = args[0]
			if !mcpconfig.ValidAgentName(opts.Name) {
				return usageErr("agent name %q: use letters, digits, - and _ (it names the agent on every record it makes)", opts.Name)
			}
			cfg, err := f.config()
			if err != nil {
				return err
			}
			for _, s := range opts.Servers {
				if _, err := cfg.Server(s); err != nil {
					return &exitError{code: exitUsage, err: err}
				}
			}
			if runF != nil {
				return runF(opts)
			}
			return agentAddRun(opts)
		},
	}
	add.Flags().StringArrayVar(&opts.Servers, "server", nil, "a configured server the agent may use (repeat for more)")
	add.Flags().StringVar(&opts.Proxy, "proxy", "127.0.0.1:8810", "the address taskdeck serve --proxy listens on, for the agent's URL")
	add.RegisterFlagCompletionFunc("server", f.completeServers)
	cmd.AddCommand(add)
	return cmd
}

func agentAddRun(opts *AgentAddOptions) error {
	f := opts.f
	// 128 random bits, in a shape secret scanners know by its prefix.
	token := "tdk_" + rand.Text()
	env := mcpconfig.EnvName(opts.Name)
	servers := opts.Servers
	if servers == nil {
		servers = []string{}
	}
	block, _ := json.Marshal(map[string]any{opts.Name: map[string]any{"token": "${" + env + "}", "servers": servers}})
	w := f.stdout
	fmt.Fprintf(w, "# 1. In the environment of `taskdeck serve --proxy` (not in a file others can read):\n")
	fmt.Fprintf(w, "export %s=%s\n\n", env, token)
	fmt.Fprintf(w, "# 2. In taskdeck's config (%s), under \"agents\":\n", f.configPath)
	fmt.Fprintf(w, "%s\n", block[1:len(block)-1])
	if _, ok := f.cfg.Agents[opts.Name]; ok {
		fmt.Fprintf(w, "#    (agent %s is already there: only its variable changes)\n", opts.Name)
	}
	if len(opts.Servers) == 0 {
		fmt.Fprintf(w, "#    (no --server given: the agent may use no server until you list some)\n")
	}
	fmt.Fprintf(w, "\n# 3. In the agent's MCP config, one entry per server:\n")
	for _, s := range slices.Sorted(slices.Values(servers)) {
		entry, _ := json.Marshal(map[string]any{s: map[string]any{
			"url":     "http://" + opts.Proxy + "/mcp/" + s,
			"headers": map[string]string{"Authorization": "Bearer " + token},
		}})
		fmt.Fprintf(w, "%s\n", entry[1:len(entry)-1])
	}
	return nil
}
