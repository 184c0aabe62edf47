package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/spf13/cobra"
	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/mcpclient/config"
	"github.com/taskdeck/taskdeck/model"
)

// DemoOptions is `taskdeck demo`.
type DemoOptions struct {
	f   *Factory
	ctx context.Context

	Speed float64
}

func newCmdDemo(f *Factory, runF func(*DemoOptions) error) *cobra.Command {
	opts := &DemoOptions{f: f}
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Open the dashboard on a built-in demo server, with a few tasks in every state",
		Long: `demo starts the demonstration MCP tasks server in this process on a loopback
port, opens a store of its own in a temporary directory (removed on exit),
launches a handful of tasks, and opens the dashboard on them.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.ctx = cmd.Context()
			if runF != nil {
				return runF(opts)
			}
			return demoRun(opts)
		},
	}
	cmd.Flags().Float64Var(&opts.Speed, "speed", 1, "multiply the demo tools' durations")
	return cmd
}

func demoRun(opts *DemoOptions) error {
	f, ctx := opts.f, opts.ctx
	if err := f.needTerminal(); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "taskdeck-demo-")
	if err != nil {
		return &exitError{code: exitLocal, err: fmt.Errorf("cannot create a temporary store: %v", err)}
	}
	// The store must be closed before its directory goes.
	defer func() {
		f.close()
		os.RemoveAll(dir)
	}()
	srv := demo.New(demo.Options{Speed: opts.Speed})
	defer srv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(ln)
	defer hs.Close()

	url := fmt.Sprintf("http://%s/mcp", ln.Addr())
	f.dataDir = dir
	f.cfg, err = config.ParseConfig("(demo)", fmt.Appendf(nil, `{"mcpServers":{"demo":{"url":%q}}}`, url))
	if err != nil {
		return err
	}
	return f.dashboardAfter(ctx, "demo server on "+url+": tasks launched in every state · ? help · n new call · q quit", launchDemoTasks)
}

// launchDemoTasks starts one task per interesting state, so that a
// newcomer sees every status within a minute.
func launchDemoTasks(ctx context.Context, d deck.Deck) error {
	ref := model.ServerRef{Name: "demo"}
	calls := []struct{ tool, args string }{
		{"sleep", `{"seconds":40}`},
		{"pipeline", `{"stages":4}`},
		{"approve", `{"action":"deploy to production"}`},
		{"survey", `{}`},
		{"echo", `{"text":"hello from the demo server"}`},
		{"fail", `{"mode":"error"}`},
		{"fail", `{"mode":"tool"}`},
		{"sleep", `{"seconds":5}`},
		{"sleep", `{"seconds":600}`},
	}
	var last *model.Task
	for _, c := range calls {
		res, err := d.Call(ctx, deck.CallRequest{Server: ref, Tool: c.tool, Args: json.RawMessage(c.args)})
		if err != nil {
			return fmt.Errorf("demo task %s: %w", c.tool, err)
		}
		last = res.Task
	}
	_, err := d.Cancel(ctx, last.ID) // the long sleep shows a cancelled task
	return err
}
