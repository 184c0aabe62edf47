package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"
	"github.com/taskdeck/taskdeck/demo"
)

// DemoServerOptions is `taskdeck demo-server`.
type DemoServerOptions struct {
	f   *Factory
	ctx context.Context

	Addr    string // HOST:PORT for streamable HTTP
	Stdio   bool
	Speed   float64
	TTL     time.Duration // how long a task is kept after it is created
	Hostile bool          // also serve a tool whose texts carry terminal escapes
	NoPush  bool          // refuse push (subscriptions/listen), as a server without it does
}

func newCmdDemoServer(f *Factory, runF func(*DemoServerOptions) error) *cobra.Command {
	opts := &DemoServerOptions{f: f}
	cmd := &cobra.Command{
		Use:   "demo-server",
		Short: "Run the demonstration MCP tasks server (HTTP prints its URL first)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.ctx = cmd.Context()
			if runF != nil {
				return runF(opts)
			}
			return demoServerRun(opts)
		},
	}
	cmd.Flags().StringVar(&opts.Addr, "addr", "127.0.0.1:8808", "HOST:PORT to serve streamable HTTP on")
	cmd.Flags().BoolVar(&opts.Stdio, "stdio", false, "serve over standard input and output instead")
	cmd.Flags().Float64Var(&opts.Speed, "speed", 1, "multiply the demo tools' durations (0.1 runs ten times faster)")
	cmd.Flags().DurationVar(&opts.TTL, "ttl", 10*time.Minute, "how long a task is kept after it is created; tasks/get then answers not found")
	cmd.Flags().BoolVar(&opts.Hostile, "hostile", false, "also serve a tool whose texts carry terminal escapes (for tests)")
	cmd.Flags().MarkHidden("hostile")
	cmd.Flags().BoolVar(&opts.NoPush, "no-push", false, "do not push task changes: clients poll, as with most servers today")
	cmd.MarkFlagsMutuallyExclusive("addr", "stdio")
	return cmd
}

func demoServerRun(opts *DemoServerOptions) error {
	f, ctx := opts.f, opts.ctx
	if opts.TTL <= 0 {
		return usageErr("--ttl %v is not a lifetime; give a positive duration such as 10m or 1h", opts.TTL)
	}
	srv := demo.New(demo.Options{Speed: opts.Speed, TTL: opts.TTL, Hostile: opts.Hostile, NoPush: opts.NoPush})
	defer srv.Close()
	if opts.Stdio {
		return srv.ServeStdio(ctx, f.stdin, f.stdout)
	}
	ln, err := net.Listen("tcp", opts.Addr)
	if err != nil {
		return usageErr("cannot listen on %s: %v; pick another --addr", opts.Addr, err)
	}
	fmt.Fprintf(f.stdout, "http://%s/mcp\n", ln.Addr())
	mux := http.NewServeMux()
	mux.Handle("/", srv.Handler())
	// The server's own count of what it created, for tests and for
	// checking taskdeck against the truth.
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(srv.Stats())
	})
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		hs.Shutdown(shutdown)
	}()
	if err := hs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
