package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	neturl "net/url"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/engine"
	mcpconfig "github.com/taskdeck/taskdeck/mcpclient/config"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/termtext"
)

// CallOptions is `taskdeck call`, validated.
type CallOptions struct {
	f   *Factory
	ctx context.Context

	Server  model.ServerRef
	Tool    string
	Args    json.RawMessage // nil: no arguments
	Key     string
	Answers map[string]json.RawMessage // --input, by key
	Wait    bool
	JSON    bool
}

func newCmdCall(f *Factory, runF func(*CallOptions) error) *cobra.Command {
	opts := &CallOptions{f: f}
	var server, url, args string
	var inputs []string
	cmd := &cobra.Command{
		Use:   "call (--server NAME | --url URL) TOOL",
		Short: "Call a tool; its task handle is on disk before this returns",
		Long: `Call a tool with the tasks extension declared. Without --wait, prints the
task's local id as soon as the handle is synced. --input KEY=RESPONSE_JSON
answers an input request with that key, before the task exists or inside
it; on a terminal, taskdeck asks for what --input does not cover.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, pos []string) error {
			opts.ctx, opts.Tool = cmd.Context(), pos[0]
			// Checked here, not with cobra's flag groups, whose errors are
			// neither a usage exit nor in taskdeck's words.
			if (server == "") == (url == "") {
				return usageErr("name the server once: call --server NAME TOOL, or call --url URL TOOL")
			}
			var err error
			if opts.Server, err = serverRef(server, url); err != nil {
				return err
			}
			if opts.Answers, err = parseInputs(inputs); err != nil {
				return err
			}
			if args != "" {
				opts.Args = json.RawMessage(args)
			}
			if _, err := engine.NormalizeArgs(opts.Args); err != nil {
				return usageErr("--args: %v", err)
			}
			if runF != nil {
				return runF(opts)
			}
			return callRun(opts)
		},
	}
	cmd.Flags().StringVar(&server, "server", "", "configured server NAME")
	cmd.Flags().StringVar(&url, "url", "", "ad-hoc server URL (streamable HTTP)")
	cmd.Flags().StringVar(&args, "args", "", "tool arguments as a JSON object")
	cmd.Flags().StringVar(&opts.Key, "key", "", "idempotency key: the same key and arguments never launch twice")
	cmd.Flags().StringArrayVar(&inputs, "input", nil, "answer input KEY with RESPONSE_JSON (repeatable)")
	cmd.Flags().BoolVar(&opts.Wait, "wait", false, "follow the task to its end, printing each change")
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print JSON objects")
	cmd.RegisterFlagCompletionFunc("server", f.completeServers)
	return cmd
}

func callRun(opts *CallOptions) error {
	f, ctx, ref := opts.f, opts.ctx, opts.Server
	dk, err := f.deck(opts.ctx)
	if err != nil {
		return err
	}
	if ref.Name != "" && !f.throughOwner() { // an owner checks its own config (Call)
		if _, err := f.cfg.Server(ref.Name); err != nil {
			return &exitError{code: exitUsage, err: err}
		}
	}
	// --input answers go with Continue, once the server has said what it
	// asks for: so a key it did not ask for is named, never sent.
	req := deck.CallRequest{Server: ref, Tool: opts.Tool, Args: opts.Args, Key: opts.Key}
	inputs := f.inputSource(opts.Answers)
	res, err := dk.Call(ctx, req)
	for err == nil && res.NeedsInput {
		res, err = inputs.beforeStart(ctx, dk, res)
	}
	if err != nil {
		return err
	}
	rec := res.Task
	if res.Reused {
		fmt.Fprintf(f.stderr, "taskdeck: key %q already names task %s; nothing new was sent\n", opts.Key, rec.ID)
	}
	stdio := f.isStdio(ref)
	defer f.warnUnasked(inputs)
	if !opts.Wait {
		if stdio && !rec.Status.Terminal() {
			f.warn(fmt.Sprintf("task %s runs on stdio server %s, which stops when this command exits: the task dies with this process; use --wait, or an HTTP server for work that must outlive the command", rec.ID, termtext.Line(ref.Name)))
		}
		if opts.JSON {
			return printJSON(f.stdout, rec)
		}
		fmt.Fprintln(f.stdout, rec.ID)
		return nil
	}
	p := f.printer(opts.JSON)
	p.change(rec)
	rec, err = f.follow(ctx, dk, rec, p, inputs)
	if err != nil && ctx.Err() != nil {
		if stdio {
			return &exitError{code: exitInterrupted, err: fmt.Errorf("stopped following task %s; its stdio server stops with taskdeck, and the task with it", rec.ID)}
		}
		return &exitError{code: exitInterrupted, err: fmt.Errorf("stopped following task %s; it keeps running on its server: `taskdeck watch` or `taskdeck get %s` follows it", rec.ID, rec.ID)}
	}
	if err != nil {
		return err
	}
	return outcome(rec)
}

// follow watches one task until it ends, answering the inputs it can, or
// stops where it waits for input nobody here can give, or after
// watchGiveUp failed polls in a row.
func (f *Factory) follow(ctx context.Context, dk deck.Deck, rec *model.Task, p *printer, inputs *inputSource) (*model.Task, error) {
	if !following(rec) {
		return rec, nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// From the call's own revision: the changes after it, not a snapshot
	// of every record in the store.
	feed, err := dk.Watch(ctx, rec.Revision)
	if err != nil {
		return rec, err
	}
	last := rec
	for ev := range feed.Events() {
		for _, e := range ev.Entries {
			if e.Task.ID != rec.ID || e.Task.UpdatedAt.Before(last.UpdatedAt) {
				continue // another task, or a state older than the answer just sent
			}
			last = e.Task
			if ev.Kind == deck.EventSnapshot {
				p.change(e.Task)
			} else {
				p.entry(e)
			}
			switch {
			case !following(last):
				return last, nil
			case e.Poll.Errors >= watchGiveUp:
				return last, &exitError{code: exitUnreachable, err: fmt.Errorf("gave up following task %s after %d failed polls in a row, the last: %s; it stays open: `taskdeck watch` follows it again",
					last.ID, watchGiveUp, termtext.Line(e.Poll.LastError))}
			case !last.WaitsForInput():
				continue
			}
			answers, err := inputs.forTask(ctx, last)
			if err != nil || len(answers) == 0 {
				if err != nil {
					fmt.Fprintf(f.stderr, "taskdeck: %s\n", errorLine(err))
				}
				return last, nil
			}
			t, err := dk.Answer(ctx, last.ID, answers)
			if err != nil {
				fmt.Fprintf(f.stderr, "taskdeck: %s\n", errorLine(err))
				if deck.KindOf(err) == deck.KindUsage || deck.KindOf(err) == deck.KindState {
					return last, nil
				}
				continue
			}
			last = t
			p.change(t)
		}
	}
	if err := feed.Err(); err != nil {
		return last, err
	}
	return last, ctx.Err()
}

// following tells whether follow waits for more of a task: one with a
// handle to poll, or a call another process still makes with the same key
// (it ends with a handle, or orphaned once it is older than a call takes).
func following(rec *model.Task) bool {
	return rec.Pollable() || rec.Status == model.StatusCalling
}

// warnUnasked says which --input answers no request asked for: they were
// not sent (a mistyped key, most likely).
func (f *Factory) warnUnasked(inputs *inputSource) {
	for _, key := range slices.Sorted(maps.Keys(inputs.given)) {
		f.warn(fmt.Sprintf("--input %s was not sent: no request asked for it while this command ran", termtext.Line(key)))
	}
}

// outcome turns a task's final state into the exit code.
func outcome(rec *model.Task) error {
	switch {
	case rec.NeedsInput():
		return needsInput(rec, nil, nil)
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

// needsInput is the exit of a call whose server waits for input before it
// starts the task and nobody here answers: the record stays, answerable
// later. again are keys whose answers the server did not take; unasked,
// --input keys it did not ask for.
func needsInput(rec *model.Task, again, unasked []string) error {
	msg := fmt.Sprintf("task %s waits for input before it starts: answer with `taskdeck answer %s KEY RESPONSE_JSON` (keys: %s)",
		rec.ID, rec.ID, strings.Join(rec.PendingInputs(), ", "))
	if len(again) > 0 {
		msg += fmt.Sprintf("; the server did not take the answer given for %s and asks for it again (another --input %s=RESPONSE_JSON, or that answer)", strings.Join(again, ", "), again[0])
	}
	if len(unasked) > 0 {
		msg += fmt.Sprintf("; it did not ask for --input %s", strings.Join(unasked, ", "))
	}
	return &exitError{code: exitWaiting, err: errors.New(msg)}
}

// isStdio reports a configured server that taskdeck starts as a child
// process: it and its tasks die with this process (when it is the owner;
// another owner runs its own servers).
func (f *Factory) isStdio(ref model.ServerRef) bool {
	if ref.Name == "" || f.throughOwner() {
		return false
	}
	s, err := f.cfg.Server(ref.Name)
	return err == nil && s.Command != ""
}

// serverRef is the server that --server or --url names (tools takes the
// name as an argument).
func serverRef(server, url string) (model.ServerRef, error) {
	if url != "" {
		if _, err := mcpconfig.AdHoc(url); err != nil {
			return model.ServerRef{}, &exitError{code: exitUsage, err: err}
		}
		// An ad-hoc URL is stored with every task and shown by ls: it must
		// carry no secret.
		if u, err := neturl.Parse(url); err == nil && (u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "") {
			return model.ServerRef{}, usageErr("--url %s holds a password, a query string or a fragment, which would be stored with every task and shown by ls; configure the server in the config file, with ${VAR} for the secret", mcpconfig.RedactURL(url))
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
