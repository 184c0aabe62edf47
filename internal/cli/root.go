// Package cli is taskdeck's command line: one file per command, each in
// the Options + run shape of gh's pkg/cmd (flags become options, which
// are validated once before anything opens; the run function does the
// work). The Factory holds what the commands share.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/engine"
	"github.com/taskdeck/taskdeck/internal/version"
	"github.com/taskdeck/taskdeck/mcpclient"
	mcpconfig "github.com/taskdeck/taskdeck/mcpclient/config"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store/badger"
	"github.com/taskdeck/taskdeck/taskdeck"
	"github.com/taskdeck/taskdeck/termtext"
	"github.com/taskdeck/taskdeck/tracing"
	"golang.org/x/term"
)

// stopGrace is how long a command may take to wind down after SIGINT or
// SIGTERM before the process exits anyway: whatever a command is stuck
// on, a signal stops it. What was synced is safe, as after kill -9.
const stopGrace = 5 * time.Second

// Main runs one command line on the process's streams, stopping at
// SIGINT or SIGTERM, and returns the exit code.
func Main(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop() // a second signal ends the process at once
		time.AfterFunc(stopGrace, func() {
			fmt.Fprintf(os.Stderr, "taskdeck: still busy %s after the signal; exiting (what was synced is safe)\n", stopGrace)
			os.Exit(exitInterrupted)
		})
	}()
	return NewFactory(os.Stdin, os.Stdout, os.Stderr).Execute(ctx, args)
}

// Factory holds what the commands share: the streams, the shared flags,
// the log, and the Deck, opened on first use and closed once at the end.
type Factory struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	// canPrompt: stdin is a terminal, so missing input may be asked for.
	canPrompt bool
	// policy paces polls (zero: the default policy); tests make it fast.
	policy model.PollPolicy

	dataDir, configPath string
	store               string // --store; "" defers to the config's "store"
	configSet           bool   // --config was given
	verbose             bool
	logFormat           logFormat
	readOnly            bool          // the dashboard as a viewer
	requestTimeout      time.Duration // bounds one request to a server (--request-timeout)
	// quiet: the dashboard owns the terminal, so warnings go to the log.
	quiet bool
	// notices, when set (the dashboard), takes what would be said on
	// stderr about the store changing hands.
	notices chan<- string
	// watchAll: a long-lived command (proxy --stdio) under which every
	// open task is watched while it runs, as serve does: by its own
	// engine when its process owns the store (at start, or after the
	// owner it worked through exited), else by that owner's (see
	// keepWatched).
	watchAll bool
	// stopWatching ends keepWatched and waits for it (nil: not started).
	stopWatching func()
	// retention: a long-lived owner (serve, the dashboard) runs the
	// config's retention schedule when its process owns the store.
	retention bool

	// observer hears the engine this process opens (serve --metrics).
	observer engine.Observer
	// tracer makes its spans when the OTEL_* environment asks for them.
	tracer *tracing.Tracer

	cfg     *mcpconfig.Config
	logFile *os.File
	logger  *slog.Logger
	dk      deck.Deck
	opened  *taskdeck.Deck // what dk was opened as (nil in tests that set dk)
}

// NewFactory is a Factory on these streams; the operator is asked for
// input only when stdin is a terminal.
func NewFactory(stdin io.Reader, stdout, stderr io.Writer) *Factory {
	f, ok := stdin.(*os.File)
	return &Factory{stdin: stdin, stdout: stdout, stderr: stderr, canPrompt: ok && term.IsTerminal(int(f.Fd()))}
}

// Execute runs one command line and returns the exit code.
func (f *Factory) Execute(ctx context.Context, args []string) int {
	root := newCmdRoot(f)
	root.SetArgs(args)
	root.SetIn(f.stdin)
	root.SetOut(f.stdout)
	root.SetErr(f.stderr)
	err := root.ExecuteContext(ctx)
	f.close()
	if err == nil {
		return exitOK
	}
	code := exitCode(err)
	if code == exitInterrupted && !errors.As(err, new(*exitError)) {
		err = errInterrupted // not "context canceled"
	}
	fmt.Fprintf(f.stderr, "taskdeck: %s\n", errorLine(err))
	return code
}

func defaultDataDir() string {
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "taskdeck")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ".taskdeck"
	}
	return filepath.Join(home, ".local", "share", "taskdeck")
}

func defaultConfigPath() string {
	dir, err := os.UserConfigDir() // honours XDG_CONFIG_HOME
	if err != nil {
		return "taskdeck.json"
	}
	return filepath.Join(dir, "taskdeck", "config.json")
}

// newCmdRoot is the root command: the dashboard, the shared flags and
// every subcommand.
func newCmdRoot(f *Factory) *cobra.Command {
	root := &cobra.Command{
		Use:   "taskdeck",
		Short: "Durable tracking of long-running MCP tool calls (Tasks extension)",
		Long: `taskdeck launches MCP tool calls, writes every task handle to a local store
before anything else happens, and follows each task to its end: across
crashes, restarts and servers that ask for input.

` + exitCodesHelp,
		Version:       version.Line(),
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRun: func(cmd *cobra.Command, _ []string) {
			f.configSet = cmd.Flags().Changed("config")
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			return f.dashboard(cmd.Context(), "? help · n new call · q quit")
		},
	}
	root.Flags().Bool("version", false, "print taskdeck's version, the commit it was built from and its Go")
	root.Flags().BoolVar(&f.readOnly, "read-only", false, "the dashboard as a viewer: list, watch and read; every action is refused")
	root.PersistentFlags().StringVar(&f.dataDir, "data-dir", defaultDataDir(), "directory of the task store and the log file")
	root.PersistentFlags().StringVar(&f.configPath, "config", defaultConfigPath(), "server configuration (mcpServers JSON)")
	root.PersistentFlags().StringVar(&f.store, "store", "", "task store: empty for Badger in --data-dir, or postgres://… for a fleet's shared database (overrides \"store\" in the config)")
	root.PersistentFlags().BoolVarP(&f.verbose, "verbose", "v", false, "debug-level logging to the log file")
	root.PersistentFlags().Var(&f.logFormat, "log-format", "the log file's lines: text, or json (one object a line; fields server, tool, record, engine as in the metrics)")
	// A knob for the tests, which cannot wait out the default.
	root.PersistentFlags().DurationVar(&f.requestTimeout, "request-timeout", mcpclient.DefaultRequestTimeout, "how long one request to a server may take")
	root.PersistentFlags().MarkHidden("request-timeout")
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &exitError{code: exitUsage, err: err}
	})
	root.AddCommand(
		newCmdDemo(f, nil),
		newCmdDemoServer(f, nil),
		newCmdCall(f, nil),
		newCmdLs(f, nil),
		newCmdGet(f, nil),
		newCmdAnswer(f, nil),
		newCmdDeadline(f, nil),
		newCmdCancel(f, nil),
		newCmdRerun(f, nil),
		newCmdForget(f, nil),
		newCmdReconcile(f),
		newCmdSettle(f, true),
		newCmdSettle(f, false),
		newCmdPrune(f, nil),
		newCmdAudit(f, nil),
		newCmdWatch(f, nil),
		newCmdServers(f, nil),
		newCmdTools(f, nil),
		newCmdDoctor(f, nil),
		newCmdServe(f, nil),
		newCmdProxy(f, nil),
		newCmdAgent(f, nil),
		newCmdNotify(f, nil),
		newCmdVersion(f),
	)
	commandWords(root)
	strictCompletion(root)
	usageArgs(root)
	return root
}

// commandWords makes each command that has subcommands (the root, audit,
// notify, agent) refuse a word that names none of them. Cobra's own check
// on the root names the word and nothing else, and a group that runs
// nothing itself (notify) printed its help for any word and exited 0.
func commandWords(cmd *cobra.Command) {
	if cmd.HasSubCommands() {
		cmd.Args = unknownCommand
		cmd.SuggestionsMinimumDistance = 2 // cobra's own; SuggestionsFor reads 0 as is
		if !cmd.Runnable() {
			cmd.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
		}
	}
	for _, sub := range cmd.Commands() {
		commandWords(sub)
	}
}

// unknownCommand refuses a word that names no subcommand of cmd, and says
// what was meant when cobra finds one near it (by spelling, or a command's
// SuggestFor).
func unknownCommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	hint := fmt.Sprintf("`%s --help` lists the commands", cmd.CommandPath())
	if near := cmd.SuggestionsFor(args[0]); len(near) > 0 {
		for i, name := range near {
			near[i] = strconv.Quote(name)
		}
		hint = fmt.Sprintf("did you mean %s? (%s)", strings.Join(near, " or "), hint)
	}
	return fmt.Errorf("unknown command %q; %s", args[0], hint)
}

// usageArgs makes cobra's checks of positional arguments, on cmd and its
// subcommands, usage errors (exit 2) like every other mistake in a command,
// in words that say what the command takes: cobra's name a word given to a
// command that takes none an unknown command (`ls open`), and a wrong count
// "accepts 1 arg(s), received 2" without the command or its arguments.
func usageArgs(cmd *cobra.Command) {
	if check := cmd.Args; check != nil {
		cmd.Args = func(cmd *cobra.Command, args []string) error {
			err := check(cmd, args)
			if err == nil {
				return nil
			}
			if !cmd.HasSubCommands() && !errors.As(err, new(*exitError)) {
				path := cmd.CommandPath()
				if len(args) > 0 && check(cmd, nil) == nil && check(cmd, args[:1]) != nil {
					err = fmt.Errorf("`%s` takes no arguments (got %q); `%s --help` says what it takes", path, args[0], path)
				} else {
					got := fmt.Sprintf("%d arguments", len(args))
					if len(args) == 1 {
						got = "1 argument"
					}
					err = fmt.Errorf("`%s` takes %s (got %s); `%s --help` says more", path, strings.TrimPrefix(cmd.Use, cmd.Name()+" "), got, path)
				}
			}
			return &exitError{code: exitUsage, err: err}
		}
	}
	for _, sub := range cmd.Commands() {
		usageArgs(sub)
	}
}

// strictCompletion makes `completion` with no shell, or one cobra has no
// script for, a usage error (cobra's own prints its help and exits 0).
func strictCompletion(root *cobra.Command) {
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() != "completion" {
			continue
		}
		var shells []string
		for _, sub := range c.Commands() {
			shells = append(shells, sub.Name())
		}
		c.Args = cobra.ArbitraryArgs
		c.RunE = func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageErr("unknown shell %q; one of %s", args[0], strings.Join(shells, ", "))
			}
			return usageErr("name a shell: completion %s", strings.Join(shells, "|"))
		}
	}
}

// config loads the server configuration once.
func (f *Factory) config() (*mcpconfig.Config, error) {
	if f.cfg == nil { // demo sets its own
		// A default config that does not exist means no servers; a file
		// the operator named must be there (a typo is not "no servers").
		if _, err := os.Stat(f.configPath); f.configSet && errors.Is(err, fs.ErrNotExist) {
			return nil, &exitError{code: exitUsage, err: &mcpconfig.ConfigError{Path: f.configPath, Msg: "does not exist; check the path, or leave out --config to use " + defaultConfigPath()}}
		}
		cfg, err := mcpconfig.LoadConfig(f.configPath)
		if err != nil {
			if errors.As(err, new(*mcpconfig.ConfigError)) {
				return nil, &exitError{code: exitUsage, err: err}
			}
			return nil, err
		}
		f.cfg = cfg
	}
	return f.cfg, nil
}

// deck opens the Deck the commands work through: the owner's, over its
// socket in the data directory, or, where no owner runs, the engine in
// this process, which then owns the store and serves it to the others
// while the command runs.
func (f *Factory) deck(ctx context.Context) (deck.Deck, error) {
	if f.dk != nil {
		return f.dk, nil
	}
	cfg, err := f.config()
	if err != nil {
		return nil, err
	}
	if err := f.openLog(); err != nil {
		return nil, err
	}
	waiting := func(msg string) {
		f.logger.Info(msg)
		if !f.quiet {
			fmt.Fprintf(f.stderr, "taskdeck: %s\n", msg)
		}
	}
	handedOver := func(pid int) {
		f.logger.Info("taskdeck serve took the store over; going on through it", "dataDir", f.dataDir, "pid", pid)
		switch {
		case f.notices != nil:
			select { // a status line: one missed is no loss
			case f.notices <- fmt.Sprintf("serve took over (pid %d); this dashboard goes on through it", pid):
			default:
			}
		case !f.quiet:
			fmt.Fprintf(f.stderr, "taskdeck: serve took over %s (pid %d); going on through it\n", f.dataDir, pid)
		}
	}
	opts := taskdeck.Options{
		HandedOver:     handedOver,
		DataDir:        f.dataDir,
		ConfigPath:     f.configPath,
		Config:         cfg,
		Store:          f.store,
		Logger:         f.logger,
		ChildStderr:    f.logFile,
		Warn:           f.warn,
		Waiting:        waiting,
		FollowConfig:   true, // an owner serves others for as long as it runs
		Retention:      f.retention,
		RequestTimeout: f.requestTimeout,
		Policy:         f.policy,
	}
	if f.watchAll {
		opts.Opened = func(e *engine.Engine) error { return e.PollNow(ctx, nil) }
	}
	// Made before it is known whether this process owns the store: a
	// tracer sends nothing until a span ends, and only an engine makes one.
	if opts.Tracer, err = f.traces(); err != nil {
		return nil, err
	}
	c, err := taskdeck.Open(ctx, opts)
	if err != nil {
		return nil, storeFailure(err)
	}
	f.dk, f.opened = c, c
	if f.watchAll {
		watching, stop := context.WithCancel(ctx)
		watched := make(chan struct{})
		go func() {
			defer close(watched)
			keepWatched(watching, c, f.logger)
		}()
		f.stopWatching = func() { stop(); <-watched }
	}
	// Through another owner, server names resolve in its config, not in
	// the one named here: say so when they differ.
	if owner, through := c.OwnerConfig(); through && f.configSet && owner != f.configFile() {
		if owner == "" {
			owner = "one it did not name"
		}
		f.warn(fmt.Sprintf("--config %s is not used: the taskdeck that owns %s serves these commands with its own config, %s; stop it (or its `taskdeck serve`) to use this one",
			termtext.Line(f.configFile()), termtext.Line(f.dataDir), termtext.Line(owner)))
	}
	return c, nil
}

// throughOwner reports commands served by another process, the owner:
// server names resolve in its config, its stdio servers are its children.
func (f *Factory) throughOwner() bool {
	if f.opened == nil {
		return false
	}
	_, through := f.opened.OwnerConfig()
	return through
}

// configInUse names the config the commands' server names resolve in:
// the owner's when another process serves them.
func (f *Factory) configInUse() string {
	if f.opened != nil {
		if owner, through := f.opened.OwnerConfig(); through && owner != "" {
			return owner
		}
	}
	return f.configPath
}

// configFile is the absolute path of the server configuration, as an
// owner reports it to its clients.
func (f *Factory) configFile() string {
	if p, err := filepath.Abs(f.configPath); err == nil {
		return p
	}
	return f.configPath
}

// openEngine opens the engine in this process, which takes the store. On
// a shared database only a member (serve) claims tasks: the dashboard and
// the other commands watch, and leave no claim behind when they end.
func (f *Factory) openEngine(cfg *mcpconfig.Config, member bool) (*engine.Engine, error) {
	tracer, err := f.traces()
	if err != nil {
		return nil, err
	}
	e, err := taskdeck.OpenEngine(taskdeck.Options{
		DataDir:        f.dataDir,
		Store:          f.store,
		Claim:          member,
		Config:         cfg,
		FollowConfig:   true, // an owner serves others for as long as it runs
		Retention:      f.retention,
		Logger:         f.logger,
		ChildStderr:    f.logFile,
		Warn:           f.warn,
		RequestTimeout: f.requestTimeout,
		Policy:         f.policy,
		Observer:       f.observer,
		Tracer:         tracer,
	})
	return e, storeFailure(err)
}

// traces is the tracer the OTEL_* environment asks for (nil: none), made
// once; a setting it refuses is a usage error.
func (f *Factory) traces() (*tracing.Tracer, error) {
	if f.tracer == nil {
		var err error
		if f.tracer, err = tracing.FromEnv(context.Background(), f.logger); err != nil {
			return nil, &exitError{code: exitUsage, err: err}
		}
	}
	return f.tracer, nil
}

// storeFailure words what the engine could not sort as the store's own
// failure: opening is the store's business alone.
func storeFailure(err error) error {
	var se *taskdeck.StoreError
	if errors.As(err, &se) && deck.KindOf(err) == deck.KindFailed {
		return &exitError{code: exitLocal, err: err}
	}
	return err
}

// storeOf is the store to open: --store, else the config's "store".
func (f *Factory) storeOf(cfg *mcpconfig.Config) string {
	if f.store != "" || cfg == nil {
		return f.store
	}
	return cfg.Store
}

func (f *Factory) warn(msg string) {
	f.logger.Warn(msg)
	if !f.quiet {
		fmt.Fprintf(f.stderr, "taskdeck: warning: %s\n", msg)
	}
}

// openLog sends every log line to a private file in the data directory:
// nothing but the command's own output reaches the terminal. The
// directory is checked first, and the log must be a regular file: a link
// planted there is never followed.
func (f *Factory) openLog() error {
	if err := badger.PrepareDir(f.dataDir); err != nil {
		return &exitError{code: exitLocal, err: err}
	}
	path := filepath.Join(f.dataDir, "taskdeck.log")
	notRegular := &exitError{code: exitLocal, err: fmt.Errorf("log %s is not a regular file (a link, or a special file); remove it, or choose another --data-dir", path)}
	if fi, err := os.Lstat(path); err == nil && !fi.Mode().IsRegular() {
		return notRegular
	}
	// O_NONBLOCK: a FIFO swapped in meanwhile must not hold the open.
	file, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY|openNoFollow|syscall.O_NONBLOCK, 0o600)
	if errors.Is(err, syscall.ELOOP) {
		return notRegular
	}
	if err != nil {
		return &exitError{code: exitLocal, err: fmt.Errorf("cannot open log file: %v; check the permissions of %s", err, f.dataDir)}
	}
	if fi, err := file.Stat(); err != nil || !fi.Mode().IsRegular() {
		file.Close()
		return notRegular
	}
	level := slog.LevelInfo
	if f.verbose {
		level = slog.LevelDebug
	}
	f.logFile = file
	hopts := &slog.HandlerOptions{Level: level}
	if f.logFormat == "json" {
		f.logger = slog.New(slog.NewJSONHandler(file, hopts))
	} else {
		f.logger = slog.New(slog.NewTextHandler(file, hopts))
	}
	return nil
}

// close releases what deck opened; it may be called more than once.
func (f *Factory) close() {
	if f.stopWatching != nil { // its feed ends before the deck closes
		f.stopWatching()
		f.stopWatching = nil
	}
	if f.dk != nil {
		if err := f.dk.Close(); err != nil {
			// What was synced is safe; say why the store was not closed cleanly.
			f.logger.Error("closing the store", "err", err)
			fmt.Fprintf(f.stderr, "taskdeck: warning: %s\n", errorLine(err))
		}
		f.dk = nil
	}
	if f.tracer != nil {
		// What is queued goes out, within a bound: a collector that is
		// down does not hold the exit.
		ctx, cancel := context.WithTimeout(context.Background(), traceFlush)
		if err := f.tracer.Shutdown(ctx); err != nil {
			f.logger.Warn("traces: not every span was sent", "err", err, "dropped", f.tracer.Dropped())
		}
		cancel()
		f.tracer = nil
	}
	if f.logFile != nil {
		f.logFile.Close()
	}
	f.logFile = nil
}

// traceFlush bounds the sending of the spans still queued at exit.
const traceFlush = 5 * time.Second

func (f *Factory) completeServers(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	cfg, err := mcpconfig.LoadConfig(f.configPath)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return cfg.Names(), cobra.ShellCompDirectiveNoFileComp
}

// What a task id's completion offers: the newest open tasks and the
// newest of any status, read from the store's indexes. It read every
// record, which froze the shell for seconds at 100,000; an older id is
// still taken whole or by any unique part of it.
const (
	completeOpen   = 200
	completeRecent = 100
)

// completeIDs offers task ids, each with its tool and status beside it.
func (f *Factory) completeIDs(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	dk, err := f.deck(cmd.Context())
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var ids []string
	seen := map[string]bool{}
	for _, fl := range []deck.Filter{{Groups: []string{"open"}, Limit: completeOpen}, {Limit: completeRecent}} {
		entries, _ := dk.List(cmd.Context(), fl)
		for _, e := range entries {
			if !seen[e.Task.ID] {
				seen[e.Task.ID] = true
				ids = append(ids, e.Task.ID+"\t"+termtext.Line(e.Task.Tool)+" "+string(e.Task.Status))
			}
		}
	}
	return ids, cobra.ShellCompDirectiveNoFileComp
}

// logFormat is --log-format: "" (text) or json; anything else is refused
// as the flags are read.
type logFormat string

func (l *logFormat) String() string {
	if *l == "" {
		return "text"
	}
	return string(*l)
}

func (l *logFormat) Set(v string) error {
	switch v {
	case "text":
		*l = ""
	case "json":
		*l = "json"
	default:
		return fmt.Errorf("%q is not a log format: text or json", v)
	}
	return nil
}

func (*logFormat) Type() string { return "text|json" }
