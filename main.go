// Command taskdeck keeps durable track of long-running MCP tool calls:
// every task handle is synced to a local store before anything else
// happens, so no task is ever orphaned by a crash or a restart.
package main

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
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/taskdeck/taskdeck/mcpclient"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store"
	"golang.org/x/term"
)

// Exit codes, documented in the README and in `taskdeck --help`.
const (
	exitOK          = 0
	exitTaskBad     = 1   // a task ended badly, a refused call, and anything unrecognised
	exitUsage       = 2   // bad flags, arguments, config, ids or answers
	exitUnreachable = 3   // a server could not be reached or did not answer in time
	exitStoreLocked = 4   // another taskdeck holds the store
	exitWaiting     = 5   // call --wait stopped at a task waiting for input
	exitLocal       = 6   // the store's own failure: damaged, unwritable, full
	exitTimedOut    = 7   // watch --timeout ran out with tasks still open
	exitInterrupted = 130 // stopped by ctrl+c or SIGTERM; tasks keep running on their servers
)

const exitCodesHelp = `Exit codes:
  0    success
  1    a task ended badly (failed, cancelled, unknown, orphaned, or a tool error),
       the server refused the call, or any other failure
  2    usage error (flags, arguments, config, task ids, answers; no terminal for the dashboard)
  3    a server could not be reached or did not answer in time
  4    the store is held by another taskdeck process
  5    call --wait stopped at a task that waits for input
  6    the store's own failure (damaged, not writable, disk full)
  7    watch --timeout ran out with tasks still open (they keep running)
  130  interrupted (ctrl+c, SIGTERM); tasks keep running on their servers`

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

// stopGrace is how long a command may take to wind down after SIGINT or
// SIGTERM before the process exits anyway: whatever a command is stuck
// on, a signal stops it. What was synced is safe, as after kill -9.
const stopGrace = 5 * time.Second

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop() // a second signal ends the process at once
		time.AfterFunc(stopGrace, func() {
			fmt.Fprintf(os.Stderr, "taskdeck: still busy %s after the signal; exiting (what was synced is safe)\n", stopGrace)
			os.Exit(exitInterrupted)
		})
	}()
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	os.Exit(code)
}

// run executes one command line and returns the exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return newApp(stdin, stdout, stderr).execute(ctx, args)
}

// newApp is an app on these streams; the operator is asked for input only
// when stdin is a terminal.
func newApp(stdin io.Reader, stdout, stderr io.Writer) *app {
	f, ok := stdin.(*os.File)
	return &app{stdin: stdin, stdout: stdout, stderr: stderr, canPrompt: ok && term.IsTerminal(int(f.Fd()))}
}

// execute runs one command line on the app and returns the exit code.
func (a *app) execute(ctx context.Context, args []string) int {
	root := a.rootCommand()
	root.SetArgs(args)
	root.SetIn(a.stdin)
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	err := root.ExecuteContext(ctx)
	a.close()
	if err == nil {
		return exitOK
	}
	code := exitCode(err)
	if code == exitInterrupted && !errors.As(err, new(*exitError)) {
		err = errInterrupted // not "context canceled"
	}
	fmt.Fprintf(a.stderr, "taskdeck: %s\n", errorLine(err))
	return code
}

// exitCode maps an error to the documented exit codes. Exit 6 is only
// for the store's own failures: anything unrecognised is 1.
func exitCode(err error) int {
	var ee *exitError
	var locked *store.LockedError
	var te *mcpclient.TransportError
	switch {
	case errors.As(err, &ee):
		return ee.code
	case errors.As(err, &locked):
		return exitStoreLocked
	case errors.Is(err, context.Canceled):
		return exitInterrupted
	case errors.As(err, &te) && te.Answered():
		return exitTaskBad
	case errors.As(err, &te) || errors.Is(err, context.DeadlineExceeded):
		return exitUnreachable
	case isUsage(err):
		return exitUsage
	case isLocal(err):
		return exitLocal
	default:
		return exitTaskBad
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

// isLocal reports the store's own failures wherever they surface: damage,
// no room to flush, a file system that refuses writes.
func isLocal(err error) bool {
	var corrupt *store.CorruptError
	return errors.As(err, &corrupt) || errors.Is(err, store.ErrNoRoomToFlush) ||
		errors.Is(err, syscall.EROFS) || errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EIO)
}

// localErr marks an error of the store as a local failure (exit 6); the
// store held by another process keeps its own code.
func localErr(err error) error {
	var locked *store.LockedError
	if err == nil || errors.As(err, &locked) {
		return err
	}
	return &exitError{code: exitLocal, err: err}
}

// errInterrupted is the one line for a command stopped by a signal.
var errInterrupted = &exitError{code: exitInterrupted, err: errors.New(
	"stopped following; open tasks on HTTP servers keep running, and `taskdeck watch` follows them again (those of stdio servers stopped with taskdeck)")}

// app holds what the commands share: flags, and the store, pool and
// tracker, opened on first use and closed once at the end.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	// canPrompt: stdin is a terminal, so missing input may be asked for.
	canPrompt bool
	// policy paces polls (zero: the default policy); tests make it fast.
	policy model.PollPolicy

	dataDir, configPath string
	configSet           bool // --config was given
	verbose             bool
	requestTimeout      time.Duration // bounds one request to a server (--request-timeout)
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
		PersistentPreRun: func(cmd *cobra.Command, _ []string) {
			a.configSet = cmd.Flags().Changed("config")
		},
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
		// A default config that does not exist means no servers; a file
		// the operator named must be there (a typo is not "no servers").
		if _, err := os.Stat(a.configPath); a.configSet && errors.Is(err, fs.ErrNotExist) {
			return nil, &mcpclient.ConfigError{Path: a.configPath, Msg: "does not exist; check the path, or leave out --config to use " + defaultConfigPath()}
		}
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
		return nil, localErr(err)
	}
	a.st = st
	a.pool = a.newPool(cfg)
	a.tracker = mcpclient.NewTracker(st, a.pool, mcpclient.TrackerOptions{Logger: a.logger, RequestTimeout: a.requestTimeout, Policy: a.policy})
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
// nothing but the command's own output reaches the terminal. The
// directory is checked first, and the log must be a regular file: a link
// planted there is never followed.
func (a *app) openLog() error {
	if err := store.PrepareDir(a.dataDir); err != nil {
		return &exitError{code: exitLocal, err: err}
	}
	path := filepath.Join(a.dataDir, "taskdeck.log")
	notRegular := &exitError{code: exitLocal, err: fmt.Errorf("log %s is not a regular file (a link, or a special file); remove it, or choose another --data-dir", path)}
	if fi, err := os.Lstat(path); err == nil && !fi.Mode().IsRegular() {
		return notRegular
	}
	// O_NONBLOCK: a FIFO swapped in meanwhile must not hold the open.
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY|openNoFollow|syscall.O_NONBLOCK, 0o600)
	if errors.Is(err, syscall.ELOOP) {
		return notRegular
	}
	if err != nil {
		return &exitError{code: exitLocal, err: fmt.Errorf("cannot open log file: %v; check the permissions of %s", err, a.dataDir)}
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return notRegular
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
			fmt.Fprintf(a.stderr, "taskdeck: warning: %s\n", errorLine(err))
		}
	}
	if a.logFile != nil {
		a.logFile.Close()
	}
	a.pool, a.st, a.logFile, a.tracker = nil, nil, nil, nil
}
