package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/spf13/cobra"
	dk "github.com/taskdeck/taskdeck/deck" // main_test.go has a deck of its own
	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/engine"
	"github.com/taskdeck/taskdeck/mcpclient"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/ui"
	"golang.org/x/term"
)

// dashboard opens the terminal UI on the store and config.
func (a *app) dashboard(ctx context.Context, greeting string) error {
	return a.dashboardAfter(ctx, greeting, nil)
}

// dashboardAfter opens the engine on the store and config, lets first
// act on it (the demo launches its tasks), then shows the dashboard on it
// until the operator quits.
func (a *app) dashboardAfter(ctx context.Context, greeting string, first func(context.Context, dk.Deck) error) error {
	if err := a.needTerminal(); err != nil {
		return err
	}
	a.quiet = true // from here on, only the renderer writes to the terminal
	cfg, err := a.config()
	if err != nil {
		return err
	}
	if err := a.openLog(); err != nil {
		return err
	}
	eng, err := engine.Open(engine.Options{DataDir: a.dataDir, Config: cfg, Logger: a.logger, ChildStderr: a.logFile,
		Warn: a.warn, RequestTimeout: a.requestTimeout, Policy: a.policy})
	if err != nil {
		return localErr(err)
	}
	defer func() {
		if err := eng.Close(); err != nil {
			a.logger.Error("closing the engine", "err", err)
		}
	}()
	if first != nil {
		if err := first(ctx, eng); err != nil {
			return err
		}
	}
	return ui.Run(ctx, ui.Options{Deck: eng, Notify: notificationsSupported(), Greeting: greeting})
}

// needTerminal refuses to start the dashboard where it cannot draw or
// read keys: stdout must be a terminal, and so must stdin or /dev/tty.
func (a *app) needTerminal() error {
	if f, ok := a.stdout.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		if a.canPrompt {
			return nil
		}
		if tty, err := os.Open("/dev/tty"); err == nil {
			tty.Close()
			return nil
		}
	}
	return usageErr("the dashboard needs a terminal; without one use `taskdeck ls`, `taskdeck watch` or `taskdeck call --wait`")
}

// notificationsSupported reports terminals known to show OSC 9 desktop
// notifications; others get only the bell.
func notificationsSupported() bool {
	switch os.Getenv("TERM_PROGRAM") {
	case "iTerm.app", "WezTerm", "ghostty":
		return true
	}
	return false
}

func (a *app) demoCommand() *cobra.Command {
	var speed float64
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Open the dashboard on a built-in demo server, with a few tasks in every state",
		Long: `demo starts the demonstration MCP tasks server in this process on a loopback
port, opens a store of its own in a temporary directory (removed on exit),
launches a handful of tasks, and opens the dashboard on them.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := a.needTerminal(); err != nil {
				return err
			}
			dir, err := os.MkdirTemp("", "taskdeck-demo-")
			if err != nil {
				return &exitError{code: exitLocal, err: fmt.Errorf("cannot create a temporary store: %v", err)}
			}
			// The store must be closed before its directory goes.
			defer func() {
				a.close()
				os.RemoveAll(dir)
			}()
			srv := demo.New(demo.Options{Speed: speed})
			defer srv.Close()
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				return err
			}
			hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
			go hs.Serve(ln)
			defer hs.Close()

			url := fmt.Sprintf("http://%s/mcp", ln.Addr())
			a.dataDir = dir
			a.cfg, err = mcpclient.ParseConfig("(demo)", fmt.Appendf(nil, `{"mcpServers":{"demo":{"url":%q}}}`, url))
			if err != nil {
				return err
			}
			return a.dashboardAfter(cmd.Context(), "demo server on "+url+": tasks launched in every state · ? help · n new call · q quit", launchDemoTasks)
		},
	}
	cmd.Flags().Float64Var(&speed, "speed", 1, "multiply the demo tools' durations")
	return cmd
}

// launchDemoTasks starts one task per interesting state, so that a
// newcomer sees every status within a minute.
func launchDemoTasks(ctx context.Context, d dk.Deck) error {
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
		res, err := d.Call(ctx, dk.CallRequest{Server: ref, Tool: c.tool, Args: json.RawMessage(c.args)})
		if err != nil {
			return fmt.Errorf("demo task %s: %w", c.tool, err)
		}
		last = res.Task
	}
	_, err := d.Cancel(ctx, last.ID) // the long sleep shows a cancelled task
	return err
}
