package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	neturl "net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/mcpclient"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store"
	"github.com/taskdeck/taskdeck/termtext"
	"github.com/taskdeck/taskdeck/ui/present"
)

func (a *app) demoServerCommand() *cobra.Command {
	var addr string
	var stdio bool
	var speed float64
	var hostile bool
	cmd := &cobra.Command{
		Use:   "demo-server",
		Short: "Run the demonstration MCP tasks server (HTTP prints its URL first)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			srv := demo.New(demo.Options{Speed: speed, Hostile: hostile})
			defer srv.Close()
			if stdio {
				return srv.ServeStdio(cmd.Context(), a.stdin, a.stdout)
			}
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return usageErr("cannot listen on %s: %v; pick another --addr", addr, err)
			}
			fmt.Fprintf(a.stdout, "http://%s/mcp\n", ln.Addr())
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
				<-cmd.Context().Done()
				shutdown, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				hs.Shutdown(shutdown)
			}()
			if err := hs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:8808", "HOST:PORT to serve streamable HTTP on")
	cmd.Flags().BoolVar(&stdio, "stdio", false, "serve over standard input and output instead")
	cmd.Flags().Float64Var(&speed, "speed", 1, "multiply the demo tools' durations (0.1 runs ten times faster)")
	cmd.Flags().BoolVar(&hostile, "hostile", false, "also serve a tool whose texts carry terminal escapes (for tests)")
	cmd.Flags().MarkHidden("hostile")
	cmd.MarkFlagsMutuallyExclusive("addr", "stdio")
	return cmd
}

func (a *app) callCommand() *cobra.Command {
	var server, url, args, key string
	var inputs []string
	var wait, asJSON bool
	cmd := &cobra.Command{
		Use:   "call (--server NAME | --url URL) TOOL",
		Short: "Call a tool; its task handle is on disk before this returns",
		Long: `Call a tool with the tasks extension declared. Without --wait, prints the
task's local id as soon as the handle is synced. --input KEY=RESPONSE_JSON
answers an input request with that key, before the task exists or inside
it; on a terminal, taskdeck asks for what --input does not cover.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, pos []string) error {
			ref, err := serverRef(server, url)
			if err != nil {
				return err
			}
			answers, err := parseInputs(inputs)
			if err != nil {
				return err
			}
			var raw json.RawMessage
			if args != "" {
				raw = json.RawMessage(args)
			}
			if _, err := mcpclient.NormalizeArgs(raw); err != nil {
				return usageErr("--args: %v", err)
			}
			tr, err := a.open()
			if err != nil {
				return err
			}
			if ref.Name != "" {
				if _, err := a.cfg.Server(ref.Name); err != nil {
					return err
				}
			}
			inputs := a.inputSource(answers)
			req := mcpclient.CallRequest{Server: ref, Tool: pos[0], Args: raw, Key: key, Input: inputs.forCall}
			if err := tr.CheckCall(cmd.Context(), req); err != nil {
				if errors.As(err, new(*mcpclient.CallError)) {
					return usageErr("%v", err)
				}
				return err
			}
			rec, reused, err := tr.Call(cmd.Context(), req)
			if err != nil {
				return err
			}
			if reused {
				fmt.Fprintf(a.stderr, "taskdeck: key %q already names task %s; nothing new was sent\n", key, rec.ID)
			}
			stdio := a.isStdio(ref)
			defer a.warnUnasked(inputs)
			if !wait {
				if stdio && !rec.Status.Terminal() {
					a.warn(fmt.Sprintf("task %s runs on stdio server %s, which stops when this command exits: the task dies with this process; use --wait, or an HTTP server for work that must outlive the command", rec.ID, termtext.Line(ref.Name)))
				}
				if asJSON {
					return printJSON(a.stdout, rec)
				}
				fmt.Fprintln(a.stdout, rec.ID)
				return nil
			}
			p := a.printer(asJSON)
			p.change(rec)
			rec, err = a.follow(cmd.Context(), tr, rec, p, inputs)
			if errors.Is(err, context.Canceled) && cmd.Context().Err() != nil {
				if stdio {
					return &exitError{code: exitInterrupted, err: fmt.Errorf("stopped following task %s; its stdio server stops with taskdeck, and the task with it", rec.ID)}
				}
				return &exitError{code: exitInterrupted, err: fmt.Errorf("stopped following task %s; it keeps running on its server: `taskdeck watch` or `taskdeck get %s` follows it", rec.ID, rec.ID)}
			}
			if err != nil {
				return err
			}
			return outcome(rec)
		},
	}
	cmd.Flags().StringVar(&server, "server", "", "configured server NAME")
	cmd.Flags().StringVar(&url, "url", "", "ad-hoc server URL (streamable HTTP)")
	cmd.Flags().StringVar(&args, "args", "", "tool arguments as a JSON object")
	cmd.Flags().StringVar(&key, "key", "", "idempotency key: the same key and arguments never launch twice")
	cmd.Flags().StringArrayVar(&inputs, "input", nil, "answer input KEY with RESPONSE_JSON (repeatable)")
	cmd.Flags().BoolVar(&wait, "wait", false, "follow the task to its end, printing each change")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON objects")
	cmd.MarkFlagsMutuallyExclusive("server", "url")
	cmd.MarkFlagsOneRequired("server", "url")
	cmd.RegisterFlagCompletionFunc("server", a.completeServers)
	return cmd
}

// follow polls one task until it ends, answering inputs it can, or
// stops where it waits for input nobody here can give.
func (a *app) follow(ctx context.Context, tr *mcpclient.Tracker, rec *model.Task, p *printer, inputs *inputSource) (*model.Task, error) {
	last := rec
	var pollErr error
	err := tr.Watch(ctx, []string{rec.ID}, mcpclient.WatchOptions{MaxFailures: watchGiveUp, OnPoll: func(res mcpclient.PollResult) bool {
		last, pollErr = res.Task, res.Err
		p.poll(res)
		if !res.Task.WaitsForInput() {
			return true
		}
		answers, err := inputs.forTask(ctx, res.Task)
		if err != nil || len(answers) == 0 {
			if err != nil {
				fmt.Fprintf(a.stderr, "taskdeck: %s\n", errorLine(err))
			}
			return false
		}
		if last, err = tr.Answer(ctx, res.Task.ID, answers); err != nil {
			fmt.Fprintf(a.stderr, "taskdeck: %s\n", errorLine(err))
			return !errors.As(err, new(*mcpclient.InputKeyError))
		}
		return true
	}})
	if err == nil && last.Status.Pollable() && !last.WaitsForInput() && pollErr != nil {
		return last, &exitError{code: exitUnreachable, err: fmt.Errorf("gave up following task %s after %d failed polls in a row, the last: %s; it stays open: `taskdeck watch` follows it again",
			last.ID, watchGiveUp, termtext.Line(pollErr.Error()))}
	}
	return last, err
}

// warnUnasked says which --input answers no request asked for: they were
// not sent (a mistyped key, most likely).
func (a *app) warnUnasked(inputs *inputSource) {
	for _, key := range slices.Sorted(maps.Keys(inputs.given)) {
		a.warn(fmt.Sprintf("--input %s was not sent: no request asked for it while this command ran", termtext.Line(key)))
	}
}

// outcome turns a task's final state into the exit code.
func outcome(rec *model.Task) error {
	switch {
	case rec.Status == model.StatusInputRequired:
		return &exitError{code: exitWaiting, err: fmt.Errorf("task %s waits for input: answer with `taskdeck answer %s KEY RESPONSE_JSON`", rec.ID, rec.ID)}
	case rec.Status == model.StatusCompleted && !rec.IsError:
		return nil
	case rec.Status == model.StatusCompleted:
		return &exitError{code: exitTaskBad, err: fmt.Errorf("task %s completed with a tool error", rec.ID)}
	case rec.Status == model.StatusCalling || rec.Status == model.StatusOrphaned:
		return &exitError{code: exitTaskBad, err: fmt.Errorf("task %s has no handle: the answer to its call never arrived, and the server may run it; `taskdeck forget %s` frees its key", rec.ID, rec.ID)}
	default:
		return &exitError{code: exitTaskBad, err: fmt.Errorf("task %s ended %s", rec.ID, rec.Status)}
	}
}

// isStdio reports a configured server that taskdeck starts as a child
// process: it and its tasks die with this process.
func (a *app) isStdio(ref model.ServerRef) bool {
	if ref.Name == "" {
		return false
	}
	s, err := a.cfg.Server(ref.Name)
	return err == nil && s.Command != ""
}

func serverRef(server, url string) (model.ServerRef, error) {
	if url != "" {
		if _, err := mcpclient.AdHoc(url); err != nil {
			return model.ServerRef{}, &exitError{code: exitUsage, err: err}
		}
		// An ad-hoc URL is stored with every task and shown by ls: it must
		// carry no secret.
		if u, err := neturl.Parse(url); err == nil && (u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "") {
			return model.ServerRef{}, usageErr("--url %s holds a password, a query string or a fragment, which would be stored with every task and shown by ls; configure the server in the config file, with ${VAR} for the secret", mcpclient.RedactURL(url))
		}
		return model.ServerRef{URL: url}, nil
	}
	return model.ServerRef{Name: server}, nil
}

func parseInputs(inputs []string) (map[string]json.RawMessage, error) {
	answers := map[string]json.RawMessage{}
	for _, in := range inputs {
		key, val, ok := strings.Cut(in, "=")
		if !ok || key == "" {
			return nil, usageErr("--input %q: want KEY=RESPONSE_JSON", in)
		}
		if !json.Valid([]byte(val)) {
			return nil, usageErr("--input %s: the response is not valid JSON", key)
		}
		answers[key] = json.RawMessage(val)
	}
	return answers, nil
}

func (a *app) lsCommand() *cobra.Command {
	var status string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List tasks from the store (no network)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var filter []model.Status
			if status != "" {
				st, err := model.ParseStatus(status)
				if err != nil {
					return usageErr("--status: %v", err)
				}
				filter = append(filter, st)
			}
			tr, err := a.open()
			if err != nil {
				return err
			}
			var tasks []*model.Task
			if filter != nil {
				tasks, err = tr.Store().ByStatus(filter...)
			} else {
				tasks, err = tr.Store().All()
			}
			if err != nil {
				return localErr(err)
			}
			if asJSON {
				for _, t := range tasks {
					if err := printJSON(a.stdout, t); err != nil {
						return err
					}
				}
				return nil
			}
			printTable(a.stdout, tasks, time.Now())
			return nil
		},
	}
	cmd.Flags().StringVar(&status, "status", "", "only tasks with this status")
	cmd.Flags().BoolVar(&asJSON, "json", false, "one JSON object per line")
	cmd.RegisterFlagCompletionFunc("status", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		var names []string
		for _, s := range model.AllStatuses {
			names = append(names, string(s))
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	})
	return cmd
}

// taskCommand builds a command that acts on the task its first argument
// names (an id, or a unique prefix of one).
func (a *app) taskCommand(use, short string, nargs int, run func(cmd *cobra.Command, tr *mcpclient.Tracker, rec *model.Task, args []string) error) *cobra.Command {
	return &cobra.Command{
		Use:               use,
		Short:             short,
		Args:              cobra.ExactArgs(nargs),
		ValidArgsFunction: a.completeIDs,
		RunE: func(cmd *cobra.Command, pos []string) error {
			tr, rec, err := a.task(pos[0])
			if err != nil {
				return err
			}
			return run(cmd, tr, rec, pos[1:])
		},
	}
}

func (a *app) getCommand() *cobra.Command {
	var asJSON bool
	cmd := a.taskCommand("get ID", "Show one task; an open task is refreshed from its server first", 1,
		func(cmd *cobra.Command, tr *mcpclient.Tracker, rec *model.Task, _ []string) error {
			var pollErr error
			if rec.Status.Pollable() {
				res, err := tr.Poll(cmd.Context(), rec.ID)
				if err != nil {
					return err
				}
				rec, pollErr = res.Task, res.Err
			}
			if asJSON {
				return printJSON(a.stdout, rec)
			}
			printDetail(a.stdout, rec, pollErr)
			return nil
		})
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON object")
	return cmd
}

func (a *app) answerCommand() *cobra.Command {
	return a.taskCommand("answer ID KEY RESPONSE_JSON", `Answer a task's input request, e.g. '{"action":"accept","content":{...}}'`, 3,
		func(cmd *cobra.Command, tr *mcpclient.Tracker, rec *model.Task, args []string) error {
			key, resp := args[0], json.RawMessage(args[1])
			if !json.Valid(resp) {
				return usageErr(`RESPONSE_JSON is not valid JSON; e.g. '{"action":"accept","content":{"approve":true}}'`)
			}
			rec, err := tr.Answer(cmd.Context(), rec.ID, map[string]json.RawMessage{key: resp})
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "answered %s of task %s\n", termtext.Line(key), rec.ID)
			return nil
		})
}

func (a *app) cancelCommand() *cobra.Command {
	return a.taskCommand("cancel ID", "Ask the server to cancel a task (tasks/cancel)", 1,
		func(cmd *cobra.Command, tr *mcpclient.Tracker, rec *model.Task, _ []string) error {
			if _, err := tr.Cancel(cmd.Context(), rec.ID); err != nil {
				return err
			}
			// One poll tells whether the server has already stopped it.
			res, err := tr.Poll(cmd.Context(), rec.ID)
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "cancel sent; task %s is %s\n", rec.ID, res.Task.Status)
			return nil
		})
}

func (a *app) forgetCommand() *cobra.Command {
	return a.taskCommand("forget ID", "Delete a task's local record without telling its server", 1,
		func(_ *cobra.Command, tr *mcpclient.Tracker, rec *model.Task, _ []string) error {
			if err := tr.Forget(rec.ID); err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "forgot task %s\n", rec.ID)
			return nil
		})
}

func (a *app) pruneCommand() *cobra.Command {
	var olderThan time.Duration
	cmd := &cobra.Command{
		Use:   "prune",
		Short: "Delete finished tasks (completed, failed, cancelled, unknown)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			tr, err := a.open()
			if err != nil {
				return err
			}
			n, err := tr.Prune(olderThan)
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "pruned %s\n", present.Count(n, "finished task"))
			return nil
		},
	}
	cmd.Flags().Var((*ageFlag)(&olderThan), "older-than", "only tasks unchanged for this long (e.g. 3d, 12h, 1d12h)")
	return cmd
}

// watchGiveUp is how many failed polls in a row make watch let a task go
// (about a minute under the default policy): a server that is down, or
// answers nothing usable, cannot hold a watch forever.
const watchGiveUp = 5

// ageFlag is a duration flag that also takes whole days ("3d", "1d12h").
type ageFlag time.Duration

func (f *ageFlag) String() string { return time.Duration(*f).String() }
func (f *ageFlag) Type() string   { return "duration" }

func (f *ageFlag) Set(s string) error {
	d, err := parseAge(s)
	if err != nil {
		return err
	}
	*f = ageFlag(d)
	return nil
}

// maxDays keeps a count of days far from overflowing a time.Duration.
const maxDays = 100_000

var leadingDays = regexp.MustCompile(`^([0-9]+)d`)

// parseAge reads a non-negative age: a Go duration ("12h", "90m"),
// optionally led by whole days ("3d", "1d12h").
func parseAge(s string) (time.Duration, error) {
	bad := fmt.Errorf("%q is not an age; write it like 3d, 12h, 90m or 1d12h", s)
	var days time.Duration
	if m := leadingDays.FindStringSubmatch(s); m != nil {
		n, err := strconv.Atoi(m[1])
		if err != nil || n > maxDays {
			return 0, bad
		}
		days, s = time.Duration(n)*24*time.Hour, s[len(m[0]):]
		if s == "" {
			return days, nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, bad
	}
	return days + d, nil
}

func (a *app) watchCommand() *cobra.Command {
	var asJSON bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "watch",
		Short: "Reconcile, then poll every open task until each has ended, waits for input, or cannot be reached",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if timeout < 0 {
				return usageErr("--timeout must not be negative (0 waits as long as it takes)")
			}
			ctx := cmd.Context()
			if timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, timeout)
				defer cancel()
			}
			tr, err := a.open()
			if err != nil {
				return err
			}
			p := a.printer(asJSON)
			timedOut := func() error {
				open, err := tr.Store().ByStatus(model.StatusWorking, model.StatusInputRequired)
				if err != nil {
					return err
				}
				n := 0
				for _, t := range open {
					if !t.WaitsForInput() {
						n++
					}
				}
				return &exitError{code: exitTimedOut, err: fmt.Errorf("--timeout %s ran out with %s still open; `taskdeck watch` picks them up again", timeout, present.Count(n, "task"))}
			}
			rep, err := tr.Reconcile(ctx, mcpclient.DefaultPerServer)
			if err != nil {
				if errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil && cmd.Context().Err() == nil {
					return timedOut()
				}
				return err
			}
			p.report(rep)
			last := map[string]mcpclient.PollResult{}
			var ids []string
			for _, t := range append(rep.Reattached, rep.Unreachable...) {
				if t.Status.Pollable() && !t.WaitsForInput() {
					ids = append(ids, t.ID)
					last[t.ID] = mcpclient.PollResult{Task: t}
				}
			}
			err = tr.Watch(ctx, ids, mcpclient.WatchOptions{MaxFailures: watchGiveUp, OnPoll: func(res mcpclient.PollResult) bool {
				p.poll(res)
				last[res.Task.ID] = res
				return !res.Task.WaitsForInput()
			}})
			if errors.Is(err, context.DeadlineExceeded) && cmd.Context().Err() == nil {
				return timedOut()
			}
			if err != nil {
				return err
			}
			// What is still open was let go after failing every poll.
			var lost []string
			var lastErr error
			for _, id := range ids {
				if res := last[id]; res.Task.Status.Pollable() && !res.Task.WaitsForInput() {
					lost, lastErr = append(lost, id), res.Err
				}
			}
			if len(lost) > 0 {
				return &exitError{code: exitUnreachable, err: fmt.Errorf("gave up on %s (%s) after %d failed polls in a row, the last: %v; they stay open for the next watch",
					present.Count(len(lost), "open task"), strings.Join(lost, ", "), watchGiveUp, termtext.Line(lastErr.Error()))}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "one JSON object per line for each change")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "stop after this long (e.g. 10m) with exit code 7 if tasks are still open; 0: no limit")
	return cmd
}

func (a *app) serversCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "servers",
		Short: "List the configured servers",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := a.config()
			if err != nil {
				return err
			}
			if len(cfg.Names()) == 0 {
				fmt.Fprintf(a.stdout, "no servers configured in %s\n", a.configPath)
				return nil
			}
			for _, name := range cfg.Names() {
				s, _ := cfg.Server(name)
				where := s.URL
				if where == "" {
					where = strings.TrimSpace(s.Command + " " + strings.Join(s.Args, " "))
				}
				fmt.Fprintf(a.stdout, "%-20s %s\n", termtext.Line(name), termtext.Line(where))
			}
			return nil
		},
	}
}

func (a *app) toolsCommand() *cobra.Command {
	var url string
	var asJSON bool
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
			return a.completeServers(cmd, args, prefix)
		},
		RunE: func(cmd *cobra.Command, pos []string) error {
			var name, tool string
			if url == "" && len(pos) > 0 {
				name, pos = pos[0], pos[1:]
			}
			if len(pos) > 1 || (name == "") == (url == "") {
				return usageErr("name one server and at most one tool: tools SERVER [TOOL], or tools --url URL [TOOL]")
			}
			if len(pos) == 1 {
				tool = pos[0]
			}
			ref, err := serverRef(name, url)
			if err != nil {
				return err
			}
			cfg, err := a.config()
			if err != nil {
				return err
			}
			if err := a.openLog(); err != nil {
				return err
			}
			// No store: listing tools works while another process holds it.
			pool := a.newPool(cfg)
			defer pool.Close()
			sess, err := pool.Session(cmd.Context(), ref)
			if err != nil {
				return err
			}
			list, err := sess.Tools(cmd.Context())
			if err != nil {
				return err
			}
			if tool != "" {
				return a.printTool(list, tool, asJSON)
			}
			if asJSON {
				for _, raw := range list.Raw {
					if err := printRawJSON(a.stdout, raw); err != nil {
						return err
					}
				}
				return nil
			}
			if !sess.SupportsTasks {
				fmt.Fprintln(a.stdout, "(this server does not advertise the tasks extension: calls return results directly)")
			}
			for _, t := range list.Tools {
				fmt.Fprintf(a.stdout, "%-20s %s\n", termtext.Line(t.Name), termtext.Line(t.Description))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&url, "url", "", "ad-hoc server URL")
	cmd.Flags().BoolVar(&asJSON, "json", false, "the tools as the server sent them, one JSON object per line")
	return cmd
}

// printTool shows one tool: its description, then one line per argument
// (its name, what it takes, its description), all server text inert.
func (a *app) printTool(list *mcpclient.ToolList, tool string, asJSON bool) error {
	args, err := list.Arguments(tool)
	var unknown *mcpclient.CallError
	if errors.As(err, &unknown) {
		return usageErr("%v", err)
	}
	if asJSON {
		return printRawJSON(a.stdout, list.Sent(tool))
	}
	fmt.Fprintf(a.stdout, "%s: %s\n", termtext.Line(tool), termtext.Line(list.Description(tool)))
	if err != nil {
		return err
	}
	if len(args) == 0 {
		fmt.Fprintln(a.stdout, "  (no arguments)")
	}
	width := 0
	for _, arg := range args {
		width = max(width, len(termtext.Line(arg.Name)))
	}
	for _, arg := range args {
		line := fmt.Sprintf("  %-*s  %s", width, termtext.Line(arg.Name), termtext.Line(arg.Summary()))
		if arg.Description != "" {
			line += ": " + termtext.Line(arg.Description)
		}
		fmt.Fprintln(a.stdout, line)
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

// task opens the store and finds a task by id or unique id prefix.
func (a *app) task(id string) (*mcpclient.Tracker, *model.Task, error) {
	tr, err := a.open()
	if err != nil {
		return nil, nil, err
	}
	rec, err := tr.Store().Get(id)
	if err == nil || !errors.Is(err, store.ErrNotFound) {
		return tr, rec, localErr(err)
	}
	all, err := tr.Store().All()
	if err != nil {
		return nil, nil, localErr(err)
	}
	var match *model.Task
	for _, t := range all {
		if strings.HasPrefix(t.ID, id) {
			if match != nil {
				return nil, nil, usageErr("%q matches several tasks; give more of the id", id)
			}
			match = t
		}
	}
	if match == nil {
		return nil, nil, usageErr("no task %q in %s; `taskdeck ls` lists them", id, a.dataDir)
	}
	return tr, match, nil
}

func (a *app) completeServers(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	cfg, err := mcpclient.LoadConfig(a.configPath)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return cfg.Names(), cobra.ShellCompDirectiveNoFileComp
}

func (a *app) completeIDs(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	st, err := store.Open(a.dataDir, nil)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	defer st.Close()
	all, _ := st.All()
	var ids []string
	for _, t := range all {
		ids = append(ids, t.ID+"\t"+termtext.Line(t.Tool)+" "+string(t.Status))
	}
	return ids, cobra.ShellCompDirectiveNoFileComp
}
