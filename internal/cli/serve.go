package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/service"
)

// ServeOptions is `taskdeck serve`.
type ServeOptions struct {
	f   *Factory
	ctx context.Context
}

// shutdownGrace bounds how long a stopping owner waits for the requests
// in flight before it closes the store.
const shutdownGrace = 10 * time.Second

func newCmdServe(f *Factory, runF func(*ServeOptions) error) *cobra.Command {
	opts := &ServeOptions{f: f}
	return &cobra.Command{
		Use:   "serve",
		Short: "Own the store for as long as it runs: watch every open task and serve the others",
		Long: `serve owns the store until it is stopped (ctrl+c or SIGTERM): it watches every
open task to its end and serves the dashboard, the commands and Go programs
on the socket in the data directory. Without it, the first taskdeck command
owns the store for its own lifetime and the next one takes over after it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.ctx = cmd.Context()
			if runF != nil {
				return runF(opts)
			}
			return serveRun(opts)
		},
	}
}

func serveRun(opts *ServeOptions) error {
	f, ctx := opts.f, opts.ctx
	cfg, err := f.config()
	if err != nil {
		return err
	}
	if err := f.openLog(); err != nil {
		return err
	}
	// An owner that already serves is the one to use, not one to replace.
	if other, err := service.Dial(ctx, f.dataDir); err == nil {
		other.Close()
		return &exitError{code: exitStoreLocked, err: fmt.Errorf("a taskdeck already serves %s; stop it first, or let the commands work through it", f.dataDir)}
	}
	e, err := f.openEngine(cfg)
	if err != nil {
		return err
	}
	srv, err := service.Serve(ctx, f.dataDir, e, f.logger, service.WithConfig(f.configFile()))
	if err != nil {
		e.Close()
		if errors.Is(err, service.ErrOwnerRunning) {
			return &exitError{code: exitStoreLocked, err: err}
		}
		return &exitError{code: exitLocal, err: err}
	}
	// An owner for the long run watches every open task from the start.
	if err := e.PollNow(ctx, nil); err != nil && deck.KindOf(err) != deck.KindCanceled {
		f.logger.Warn("starting the watch", "err", err)
	}
	fmt.Fprintf(f.stderr, "taskdeck: serving %s on %s (pid %d); ctrl+c stops\n", f.dataDir, srv.Path(), os.Getpid())
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	shutErr := srv.Shutdown(sctx)
	if err := errors.Join(shutErr, e.Close()); err != nil {
		return &exitError{code: exitLocal, err: err}
	}
	return nil
}
