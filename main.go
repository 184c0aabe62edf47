// Command taskdeck keeps durable track of long-running MCP tool calls:
// every task handle is synced to a local store before anything else
// happens, so no task is ever orphaned by a crash or a restart.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/taskdeck/taskdeck/mcpclient"
	"github.com/taskdeck/taskdeck/store"
)

// Exit codes, documented in the README and in `taskdeck --help`.
const (
	exitOK          = 0
	exitTaskBad     = 1 // a task ended failed, cancelled, unknown, orphaned, or with a tool error
	exitUsage       = 2 // bad flags, arguments, config, ids or answers
	exitUnreachable = 3 // a server could not be reached
	exitStoreLocked = 4 // another taskdeck holds the store
	exitWaiting     = 5 // call --wait stopped at a task waiting for input
	exitLocal       = 6 // a local failure: the store is damaged or unwritable
)

const exitCodesHelp = `Exit codes:
  0  success
  1  a task ended badly (failed, cancelled, unknown, orphaned, or a tool error)
  2  usage error (flags, arguments, config, task ids, answers)
  3  a server could not be reached
  4  the store is held by another taskdeck process
  5  call --wait stopped at a task that waits for input
  6  local failure (store damaged or not writable)`

// exitError carries an exit code up to main.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func usageErr(format string, args ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, args...)}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes one command line and returns the exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	a := &app{stdin: stdin, stdout: stdout, stderr: stderr}
	root := a.rootCommand()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	a.close()
	if err == nil {
		return exitOK
	}
	code := exitCode(err)
	fmt.Fprintf(stderr, "taskdeck: %s\n", oneLine(err.Error()))
	return code
}

// exitCode maps an error to the documented exit codes.
func exitCode(err error) int {
	var ee *exitError
	var locked *store.LockedError
	var te *mcpclient.TransportError
	switch {
	case errors.As(err, &ee):
		return ee.code
	case errors.As(err, &locked):
		return exitStoreLocked
	case errors.As(err, &te):
		return exitUnreachable
	case isUsage(err):
		return exitUsage
	default:
		return exitLocal
	}
}

// isUsage reports errors that the operator fixes by changing the command.
func isUsage(err error) bool {
	var cfg *mcpclient.ConfigError
	var key *mcpclient.KeyConflictError
	var input *mcpclient.InputKeyError
	var state *mcpclient.StateError
	var need *mcpclient.InputNeededError
	var answer *mcpclient.AnswerError
	return errors.As(err, &cfg) || errors.As(err, &key) || errors.As(err, &input) ||
		errors.As(err, &state) || errors.As(err, &need) || errors.As(err, &answer) ||
		errors.Is(err, store.ErrNotFound)
}

// app holds what the commands share: flags, and the store, pool and
// tracker, opened on first use and closed once at the end.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer

	dataDir, configPath string
	verbose             bool
	requestTimeout      time.Duration
	// quiet: the dashboard owns the terminal, so warnings go to the log.
	quiet bool

	cfg     *mcpclient.Config
	logFile *os.File
	logger  *slog.Logger
	st      *store.Store
	pool    *mcpclient.Pool
	tracker *mcpclient.Tracker
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

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "taskdeck",
		Short: "Durable tracking of long-running MCP tool calls (Tasks extension)",
		Long: `taskdeck launches MCP tool calls, writes every task handle to a local store
before anything else happens, and follows each task to its end: across
crashes, restarts and servers that ask for input.

` + exitCodesHelp,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.dashboard(cmd.Context(), "? help · n new call · q quit")
		},
	}
	root.PersistentFlags().StringVar(&a.dataDir, "data-dir", defaultDataDir(), "directory of the task store and the log file")
	root.PersistentFlags().StringVar(&a.configPath, "config", defaultConfigPath(), "server configuration (mcpServers JSON)")
	root.PersistentFlags().BoolVarP(&a.verbose, "verbose", "v", false, "debug-level logging to the log file")
	// A knob for the tests, which cannot wait out the default.
	root.PersistentFlags().DurationVar(&a.requestTimeout, "request-timeout", mcpclient.DefaultRequestTimeout, "how long one request to a server may take")
	root.PersistentFlags().MarkHidden("request-timeout")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &exitError{code: exitUsage, err: err}
	})
	root.AddCommand(
		a.demoCommand(),
		a.demoServerCommand(),
		a.callCommand(),
		a.lsCommand(),
		a.getCommand(),
		a.answerCommand(),
		a.cancelCommand(),
		a.forgetCommand(),
		a.pruneCommand(),
		a.watchCommand(),
		a.serversCommand(),
		a.toolsCommand(),
	)
	return root
}

// config loads the server configuration once.
func (a *app) config() (*mcpclient.Config, error) {
	if a.cfg == nil { // demo sets its own
		cfg, err := mcpclient.LoadConfig(a.configPath)
		if err != nil {
			return nil, err
		}
		a.cfg = cfg
	}
	return a.cfg, nil
}

// open opens the log, the store and the tracker.
func (a *app) open() (*mcpclient.Tracker, error) {
	if a.tracker != nil {
		return a.tracker, nil
	}
	cfg, err := a.config()
	if err != nil {
		return nil, err
	}
	if err := a.openLog(); err != nil {
		return nil, err
	}
	st, err := store.Open(a.dataDir, a.logger)
	if err != nil {
		return nil, err
	}
	a.st = st
	a.pool = a.newPool(cfg)
	a.tracker = mcpclient.NewTracker(st, a.pool, mcpclient.TrackerOptions{Logger: a.logger, RequestTimeout: a.requestTimeout})
	return a.tracker, nil
}

// newPool connects to servers with the app's log file and warnings.
func (a *app) newPool(cfg *mcpclient.Config) *mcpclient.Pool {
	return mcpclient.NewPool(mcpclient.PoolOptions{
		Config:         cfg,
		Logger:         a.logger.With("component", "mcp"),
		ChildStderr:    a.logFile,
		Warn:           a.warn,
		RequestTimeout: a.requestTimeout,
	})
}

func (a *app) warn(msg string) {
	a.logger.Warn(msg)
	if !a.quiet {
		fmt.Fprintf(a.stderr, "taskdeck: warning: %s\n", msg)
	}
}

// openLog sends every log line to a private file in the data directory:
// nothing but the command's own output reaches the terminal.
func (a *app) openLog() error {
	if err := os.MkdirAll(a.dataDir, 0o700); err != nil {
		return &exitError{code: exitLocal, err: fmt.Errorf("cannot create data directory %s: %v; choose another with --data-dir", a.dataDir, err)}
	}
	f, err := os.OpenFile(filepath.Join(a.dataDir, "taskdeck.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return &exitError{code: exitLocal, err: fmt.Errorf("cannot open log file: %v; check the permissions of %s", err, a.dataDir)}
	}
	level := slog.LevelInfo
	if a.verbose {
		level = slog.LevelDebug
	}
	a.logFile = f
	a.logger = slog.New(slog.NewTextHandler(f, &slog.HandlerOptions{Level: level}))
	return nil
}

// close releases what open opened; it may be called more than once.
func (a *app) close() {
	if a.pool != nil {
		a.pool.Close()
	}
	if a.st != nil {
		if err := a.st.Close(); err != nil {
			// What was synced is safe; say why the store was not closed cleanly.
			a.logger.Error("closing the store", "err", err)
			fmt.Fprintf(a.stderr, "taskdeck: warning: %s\n", oneLine(err.Error()))
		}
	}
	if a.logFile != nil {
		a.logFile.Close()
	}
	a.pool, a.st, a.logFile, a.tracker = nil, nil, nil, nil
}
