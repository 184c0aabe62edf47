package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"

	"github.com/spf13/cobra"
	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/mcpclient"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/termtext"
)

// ToolsOptions is `taskdeck tools`, validated.
type ToolsOptions struct {
	f   *Factory
	ctx context.Context

	Server model.ServerRef
	Tool   string // "": list every tool
	JSON   bool
}

func newCmdTools(f *Factory, runF func(*ToolsOptions) error) *cobra.Command {
	opts := &ToolsOptions{f: f}
	var url string
	cmd := &cobra.Command{
		Use:   "tools (SERVER | --url URL) [TOOL] [--json]",
		Short: "List a server's tools, or show one tool's arguments",
		Long: `List a server's tools, or with TOOL that tool's arguments: type, required,
default, allowed values, range, format, header and description. --json prints
each tool exactly as the server sent it, one JSON object per line.`,
		Args: cobra.ArbitraryArgs, // checked below, as a usage error
		ValidArgsFunction: func(cmd *cobra.Command, args []string, prefix string) ([]string, cobra.ShellCompDirective) {
			if len(args) > 0 || cmd.Flags().Changed("url") { // a tool name: not completed, that needs the server
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			return f.completeServers(cmd, args, prefix)
		},
		RunE: func(cmd *cobra.Command, pos []string) error {
			var name string
			if url == "" && len(pos) > 0 {
				name, pos = pos[0], pos[1:]
			}
			if len(pos) > 1 || (name == "") == (url == "") {
				return usageErr("name one server and at most one tool: tools SERVER [TOOL], or tools --url URL [TOOL]")
			}
			if len(pos) == 1 {
				opts.Tool = pos[0]
			}
			var err error
			if opts.Server, err = serverRef(name, url); err != nil {
				return err
			}
			opts.ctx = cmd.Context()
			if runF != nil {
				return runF(opts)
			}
			return toolsRun(opts)
		},
	}
	cmd.Flags().StringVar(&url, "url", "", "ad-hoc server URL")
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "the tools as the server sent them, one JSON object per line")
	return cmd
}

func toolsRun(opts *ToolsOptions) error {
	f, ctx := opts.f, opts.ctx
	dk, err := f.deck(opts.ctx)
	if err != nil {
		return err
	}
	list, err := dk.Tools(ctx, opts.Server, false)
	if err != nil {
		return err
	}
	if opts.Tool != "" {
		i := slices.IndexFunc(list.Tools, func(t deck.Tool) bool { return t.Name == opts.Tool })
		if i < 0 {
			names := make([]string, len(list.Tools))
			for i, t := range list.Tools {
				names[i] = t.Name
			}
			return usageErr("%v", mcpclient.UnknownTool(opts.Tool, names))
		}
		return printTool(f.stdout, list.Tools[i], opts.JSON)
	}
	if opts.JSON {
		for _, t := range list.Tools {
			if err := printRawJSON(f.stdout, t.Raw); err != nil {
				return err
			}
		}
		return nil
	}
	if !list.SupportsTasks {
		fmt.Fprintln(f.stdout, "(this server does not advertise the tasks extension: calls return results directly)")
	}
	for _, t := range list.Tools {
		fmt.Fprintf(f.stdout, "%-20s %s\n", termtext.Line(t.Name), termtext.Line(t.Description))
	}
	return nil
}

// printTool shows one tool: its description, then one line per argument
// (its name, what it takes, its description), all server text inert.
func printTool(w io.Writer, tool deck.Tool, asJSON bool) error {
	if asJSON {
		return printRawJSON(w, tool.Raw)
	}
	fmt.Fprintf(w, "%s: %s\n", termtext.Line(tool.Name), termtext.Line(tool.Description))
	if len(tool.Arguments) == 0 {
		fmt.Fprintln(w, "  (no arguments)")
	}
	width := 0
	for _, arg := range tool.Arguments {
		width = max(width, len(termtext.Line(arg.Name)))
	}
	for _, arg := range tool.Arguments {
		line := fmt.Sprintf("  %-*s  %s", width, termtext.Line(arg.Name), termtext.Line(arg.Summary))
		if arg.Description != "" {
			line += ": " + termtext.Line(arg.Description)
		}
		fmt.Fprintln(w, line)
	}
	return nil
}

// printRawJSON prints a server's JSON on one line, its values untouched
// and controls escaped.
func printRawJSON(w io.Writer, raw json.RawMessage) error {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return err
	}
	b.WriteByte('\n')
	_, err := w.Write(inertJSON(b.Bytes()))
	return err
}
