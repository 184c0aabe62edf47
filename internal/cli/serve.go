package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/spf13/cobra"
	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/engine"
	mcpconfig "github.com/taskdeck/taskdeck/mcpclient/config"
	"github.com/taskdeck/taskdeck/proxy"
	"github.com/taskdeck/taskdeck/service"
	"github.com/taskdeck/taskdeck/telemetry"

	"github.com/taskdeck/taskdeck/store"
)

// ServeOptions is `taskdeck serve`.
type ServeOptions struct {
	f   *Factory
	ctx context.Context
	// ProxyAddr, when set, is where agents reach the proxy (each with its
	// token from the config's "agents"); Token is the operator's
	// credential there (required off loopback).
	ProxyAddr, Token string
	// MetricsAddr, when set, is where Prometheus scrapes the engine's
	// metrics (the Token rules of the proxy: loopback unless given one).
	MetricsAddr string
}

// shutdownGrace bounds how long a stopping owner waits for the requests
// in flight before it closes the store: well inside stopGrace, after
// which the process exits without closing anything.
const shutdownGrace = stopGrace / 2

// tokenEnv carries the proxy's token without putting it on a command
// line, where every user of the machine can read it.
const tokenEnv = "TASKDECK_PROXY_TOKEN"

func newCmdServe(f *Factory, runF func(*ServeOptions) error) *cobra.Command {
	opts := &ServeOptions{f: f}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Own the store for as long as it runs: watch every open task and serve the others",
		Long: `serve owns the store until it is stopped (ctrl+c or SIGTERM): it watches every
open task to its end and serves the dashboard, the commands and Go programs
on the socket in the data directory. Without it, the first taskdeck command
owns the store for its own lifetime and the next one takes over after it.

With --proxy ADDR it also serves MCP agents: one endpoint per configured
server at http://ADDR/mcp/<name>, every task they start recorded before
they hear of it. Every agent sends its token (taskdeck agent add NAME makes
one); each sees only its own tasks (see "Put taskdeck in front of your
agent" in the README).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.ctx = cmd.Context()
			if opts.Token == "" {
				opts.Token = os.Getenv(tokenEnv)
			}
			if opts.ProxyAddr != "" {
				if err := proxy.CheckListen(opts.ProxyAddr, opts.Token); err != nil {
					return &exitError{code: exitUsage, err: err}
				}
			}
			if opts.MetricsAddr != "" {
				if err := telemetry.CheckListen(opts.MetricsAddr, opts.Token); err != nil {
					return &exitError{code: exitUsage, err: err}
				}
			}
			if runF != nil {
				return runF(opts)
			}
			return serveRun(opts)
		},
	}
	cmd.Flags().StringVar(&opts.ProxyAddr, "proxy", "", "also serve MCP agents on HOST:PORT, each with its token from the config's \"agents\" (loopback unless --token is given)")
	cmd.Flags().StringVar(&opts.MetricsAddr, "metrics", "", "serve Prometheus metrics at http://HOST:PORT/metrics (loopback unless --token is given; then scrapers send it)")
	cmd.Flags().StringVar(&opts.Token, "token", "", "the operator's bearer token at the proxy: every server, every task (needed off loopback); prefer $"+tokenEnv+", which other users cannot read in ps")
	return cmd
}

// noAuditKey is serve's warning on a fleet without an audit key.
var noAuditKey = fmt.Sprintf("no $%s: this fleet's audit log is not sealed, so whoever can write the database can rewrite a record with its audit entries and `taskdeck audit verify` will not see it; give every host the same key (make one with `openssl rand -hex 32`)", store.AuditKeyEnv)

func serveRun(opts *ServeOptions) error {
	f, ctx := opts.f, opts.ctx
	store.TuneOwnerGC() // a smaller heap for the long-lived owner (issue 20)
	cfg, err := f.config()
	if err != nil {
		return err
	}
	if err := f.openLog(); err != nil {
		return err
	}
	if opts.ProxyAddr != "" {
		// The agents' tokens are checked before the store is taken over
		// from a dashboard, which would hand it over for nothing.
		check := proxy.New(proxy.Options{Config: cfg, Token: opts.Token})
		_, err := check.Handler()
		check.Close()
		if err != nil {
			return &exitError{code: exitUsage, err: err}
		}
	}
	// On a shared database every process runs its own engine: none owns
	// the data dir, so no socket is served there.
	shared := engine.IsPostgres(f.storeOf(cfg))
	f.retention = true
	// The metrics' address is taken first: one in use fails serve before
	// it takes the store.
	var metrics *telemetry.Metrics
	var scrapeLn net.Listener
	if opts.MetricsAddr != "" {
		if scrapeLn, err = net.Listen("tcp", opts.MetricsAddr); err != nil {
			return &exitError{code: exitTaskBad, err: fmt.Errorf("metrics cannot listen on %s: %w", opts.MetricsAddr, err)}
		}
		defer scrapeLn.Close()
		metrics = telemetry.New(cfg.Names())
		f.observer = metrics
	}
	var e *engine.Engine
	release := func() {}
	if shared {
		e, err = f.openEngine(cfg, true)
	} else {
		e, release, err = takeOver(ctx, f, cfg)
	}
	if err != nil || e == nil {
		return err
	}
	if err := e.CheckAuditKey(); err != nil {
		e.Close()
		return err
	}
	if shared && e.AuditKey() == nil {
		f.warn(noAuditKey)
	}
	var srv *service.Server
	if !shared {
		srv, err = service.Serve(ctx, f.dataDir, e, f.logger, service.WithConfig(f.configFile()), service.AsLasting())
	}
	// Serving, or failed to: nobody is to wait for this serve any more.
	release()
	if err != nil {
		e.Close()
		if errors.Is(err, service.ErrOwnerRunning) {
			return &exitError{code: exitStoreLocked, err: err}
		}
		return &exitError{code: exitLocal, err: err}
	}
	var agents *http.Server
	var px *proxy.Proxy
	if opts.ProxyAddr != "" {
		ln, err := proxy.Listen(opts.ProxyAddr, opts.Token)
		if err != nil {
			if srv != nil {
				srv.Shutdown(context.Background())
			}
			e.Close()
			// The address was checked above: what is left (a port in use) is
			// no usage error.
			return &exitError{code: exitTaskBad, err: err}
		}
		px = proxy.New(proxy.Options{Deck: e, Config: cfg, Logger: f.logger.With("component", "proxy"), Token: opts.Token,
			HandleKey: proxy.HandleKeyFrom(e.AuditKey())})
		h, err := px.Handler()
		if err != nil {
			ln.Close()
			px.Close()
			if srv != nil {
				srv.Shutdown(context.Background())
			}
			e.Close()
			return &exitError{code: exitUsage, err: err}
		}
		// No write timeout: a held call stays open until its task ends.
		agents = &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(f.logger.Handler(), slog.LevelWarn)}
		go agents.Serve(ln)
		fmt.Fprintf(f.stderr, "taskdeck: agents reach server NAME at http://%s/mcp/NAME\n", ln.Addr())
		fmt.Fprintf(f.stderr, "taskdeck: operators reach the inbox at http://%s%s\n", ln.Addr(), proxy.InboxPath)
	}
	if metrics != nil {
		metrics.Watch(e)
		if f.tracer != nil {
			metrics.WatchTraces(f.tracer.Dropped)
		}
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", metrics.Handler(opts.Token))
		scrape := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(f.logger.Handler(), slog.LevelWarn)}
		go scrape.Serve(scrapeLn)
		defer scrape.Close()
		fmt.Fprintf(f.stderr, "taskdeck: metrics at http://%s/metrics\n", scrapeLn.Addr())
	}
	// An owner for the long run watches every open task from the start.
	if err := e.PollNow(ctx, nil); err != nil && deck.KindOf(err) != deck.KindCanceled {
		f.logger.Warn("starting the watch", "err", err)
	}
	if shared {
		fmt.Fprintf(f.stderr, "taskdeck: watching its claimed tasks on %s (pid %d); ctrl+c stops\n", engine.RedactStore(f.storeOf(cfg)), os.Getpid())
		f.logger.Info("serve: started", "store", engine.RedactStore(f.storeOf(cfg)), "config", f.configFile(), "proxy", opts.ProxyAddr, "pid", os.Getpid())
	} else {
		fmt.Fprintf(f.stderr, "taskdeck: serving %s on %s (pid %d); ctrl+c stops\n", f.dataDir, srv.Path(), os.Getpid())
		f.logger.Info("serve: started", "dataDir", f.dataDir, "socket", srv.Path(), "config", f.configFile(), "proxy", opts.ProxyAddr, "pid", os.Getpid())
	}
	<-ctx.Done()
	f.logger.Info("serve: stopping", "why", context.Cause(ctx))
	defer f.logger.Info("serve: stopped")
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	var proxyErr error
	if agents != nil {
		// The proxy first: closing it answers the held calls (their tasks
		// go on, watched by the next owner), so that the agents' server has
		// no request left to wait for.
		proxyErr = errors.Join(px.Close(), agents.Shutdown(sctx))
	}
	shutErr := proxyErr
	if srv != nil {
		shutErr = errors.Join(shutErr, srv.Shutdown(sctx))
	}
	if err := errors.Join(shutErr, e.Close()); err != nil {
		return &exitError{code: exitLocal, err: err}
	}
	return nil
}

// takeOverPoll is how often a serve taking over from a transient owner
// looks whether it has let go; lockedFor bounds how long the store may
// stay locked by a process that does not serve it (one starting or
// stopping to serve takes a moment) before serve gives up with the
// store's error: longer after a handover was asked, for the owner's
// requests in flight to end.
const (
	takeOverPoll = 200 * time.Millisecond
	lockedFor    = 10 * time.Second
)

// takeOver opens the engine as the store's owner. An owner that already
// serves until stopped is the one to use, not one to replace; a transient
// owner (a dashboard, watch, a command) is asked to hand the store over,
// with one line saying so, and goes on through this serve. One too old to
// be asked is waited for until it exits. A nil engine and nil error: ctx
// ended first. release removes the take-over mark: call it once serving.
func takeOver(ctx context.Context, f *Factory, cfg *mcpconfig.Config) (e *engine.Engine, release func(), err error) {
	release = func() {}
	var told, asked bool
	var lockedSince time.Time
	defer func() {
		if e == nil {
			release()
		}
	}()
	for {
		if other, err := service.Dial(ctx, f.dataDir); err == nil {
			pid, lasting, _ := service.OwnerOf(other)
			if lasting {
				other.Close()
				return nil, release, &exitError{code: exitStoreLocked, err: fmt.Errorf("a taskdeck already serves %s (pid %d); stop it first, or let the commands work through it", f.dataDir, pid)}
			}
			done, err := service.AskHandOver(ctx, f.dataDir, other)
			other.Close()
			lockedSince = time.Time{}
			switch {
			case err == nil:
				release()
				release, asked = done, true
				if !told {
					told = true
					fmt.Fprintf(f.stderr, "taskdeck: taking %s over from the dashboard or command (pid %d) that owns it; it goes on through this serve\n", f.dataDir, pid)
					f.logger.Info("serve: taking over from a transient owner", "dataDir", f.dataDir, "pid", pid)
				}
			case !told:
				told = true
				fmt.Fprintf(f.stderr, "taskdeck: waiting for %s: a dashboard or command (pid %d) owns it and does not hand over (%s); serving once it exits\n", f.dataDir, pid, errorLine(err))
				f.logger.Info("serve: waiting for a transient owner", "dataDir", f.dataDir, "pid", pid, "err", err)
			}
		} else {
			e, err := f.openEngine(cfg, true)
			if deck.KindOf(err) != deck.KindLocked {
				return e, release, err
			}
			bound := lockedFor
			if asked {
				bound += service.HandOverGrace
			}
			if lockedSince.IsZero() {
				lockedSince = time.Now()
			} else if time.Since(lockedSince) > bound {
				return nil, release, err
			}
		}
		select {
		case <-ctx.Done():
			return nil, release, nil
		case <-time.After(takeOverPoll):
		}
	}
}
