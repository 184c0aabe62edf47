// Package taskdeck opens a Deck for a Go program as the command line
// opens one: on a PostgreSQL store, the engine in this process (every
// process runs its own on a shared database); on Badger, through the
// socket of the taskdeck that owns the data directory, or, where none
// does, the engine in this process, which then owns the store and
// serves it to the others until Close. Whatever was chosen, the Deck's
// contract is the same (package deck).
package taskdeck

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/engine"
	mcpconfig "github.com/taskdeck/taskdeck/mcpclient/config"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/service"
	_ "github.com/taskdeck/taskdeck/store/postgres" // a config's "store" may name a fleet's database
	"github.com/taskdeck/taskdeck/tracing"
)

// Options say where the records are and which servers calls may name.
// Only DataDir is needed.
type Options struct {
	// DataDir holds the Badger store and the owner's socket (and, on
	// PostgreSQL, nothing but the log a program may keep there).
	DataDir string
	// ConfigPath is the server configuration (servers.json): server names
	// resolve in it, and its "store" may name a PostgreSQL database. ""
	// or a missing file is no servers (calls then name a server by URL).
	ConfigPath string
	// Config, when set, is used instead of reading ConfigPath (which is
	// still the path reported to the owner's clients).
	Config *mcpconfig.Config
	// Store overrides the config's "store": a postgres:// URL, or "" for
	// Badger in DataDir.
	Store string
	// Claim joins a PostgreSQL fleet: the engine claims its share of the
	// open tasks and polls them (`taskdeck serve` does). Without it the
	// engine watches the fleet's tasks and claims none, so closing it
	// moves no work. Badger ignores it: its one owner polls every task.
	Claim bool
	// FollowConfig reads ConfigPath again when it changes, for a process
	// that owns the store while the file is edited (the command line sets
	// it; see engine.Options.FollowConfig).
	FollowConfig bool
	// Retention runs the config's "retention" schedule while this process
	// owns the store: for an owner for the long run (serve, the dashboard).
	Retention bool

	Logger         *slog.Logger  // nil: discard
	ChildStderr    io.Writer     // stdio servers' stderr; nil: discard
	Warn           func(string)  // config warnings; nil: logged
	Waiting        func(string)  // told once when the store's holder is slow to serve it; nil: nobody
	HandedOver     func(pid int) // told when this process, the owner, has handed the store over to taskdeck serve (pid); nil: nobody
	RequestTimeout time.Duration // one request to a server; zero: the default
	// Policy paces polls; zero: model.DefaultPollPolicy.
	Policy model.PollPolicy
	// Observer hears the engine's polls and calls (package telemetry's
	// metrics); nil: nobody. OpenEngine only.
	Observer engine.Observer
	// Tracer makes the engine's spans (tracing.FromEnv); nil: tracing
	// off. OpenEngine only.
	Tracer *tracing.Tracer
	// Opened, when set, is called with the engine this process opens
	// (the command line's `--all` polls every open task at once).
	Opened func(*engine.Engine) error
}

// Deck is the opened deck.Deck.
type Deck struct {
	deck.Deck
	client *service.Client // nil: the engine in process, on PostgreSQL
	config string
}

// Open opens the Deck opts describe. Close it to release the store (an
// owner hands it to the next process that opens it).
func Open(ctx context.Context, opts Options) (*Deck, error) {
	cfg := opts.Config
	if cfg == nil {
		var err error
		if cfg, err = mcpconfig.LoadConfig(opts.ConfigPath); err != nil {
			return nil, err
		}
	}
	configFile := opts.ConfigPath
	if p, err := filepath.Abs(configFile); err == nil && configFile != "" {
		configFile = p
	}
	store := opts.Store
	if store == "" {
		store = cfg.Store
	}
	opts.Config, opts.Store = cfg, store
	own := func() (deck.Deck, error) {
		e, err := OpenEngine(opts)
		if err != nil {
			return nil, err
		}
		if opts.Opened != nil {
			if err := opts.Opened(e); err != nil {
				e.Close()
				return nil, err
			}
		}
		return e, nil
	}
	if engine.IsPostgres(store) {
		d, err := own()
		if err != nil {
			return nil, err
		}
		return &Deck{Deck: d, config: configFile}, nil
	}
	c, err := service.Open(ctx, service.Options{DataDir: opts.DataDir, Own: own, Config: configFile, Logger: opts.Logger, Waiting: opts.Waiting, HandedOver: opts.HandedOver})
	if err != nil {
		return nil, err
	}
	return &Deck{Deck: c, client: c, config: configFile}, nil
}

// OpenEngine opens the engine in this process over the store, as Open
// does where it owns it (`taskdeck serve` always does): opts.Config is
// the config to use (nil: no servers). Opened is not called.
func OpenEngine(opts Options) (*engine.Engine, error) {
	store := opts.Store
	if store == "" && opts.Config != nil {
		store = opts.Config.Store
	}
	e, err := engine.Open(engine.Options{
		DataDir:        opts.DataDir,
		Store:          store,
		Claim:          opts.Claim,
		Config:         opts.Config,
		FollowConfig:   opts.FollowConfig,
		Retention:      opts.Retention,
		Logger:         opts.Logger,
		ChildStderr:    opts.ChildStderr,
		Warn:           opts.Warn,
		RequestTimeout: opts.RequestTimeout,
		Policy:         opts.Policy,
		Observer:       opts.Observer,
		Tracer:         opts.Tracer,
	})
	if err != nil {
		return nil, &StoreError{Err: err}
	}
	return e, nil
}

// OwnerConfig is the server configuration of the process that serves
// this Deck now, and whether that is another process (whose config, not
// this one's, names the servers, and whose children the stdio servers
// are). The owner may change while the Deck is open.
func (d *Deck) OwnerConfig() (path string, through bool) {
	if d.client != nil {
		if path, through := d.client.OwnerConfig(); through {
			return path, true
		}
	}
	return d.config, false
}

// StoreError is a failure to open the engine over its store: the store's
// own (damaged, locked by another, unreachable), not a server's.
type StoreError struct{ Err error }

func (e *StoreError) Error() string { return e.Err.Error() }
func (e *StoreError) Unwrap() error { return e.Err }
