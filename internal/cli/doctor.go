package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/taskdeck/taskdeck/engine"
	"github.com/taskdeck/taskdeck/mcpclient"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/termtext"
)

// DoctorOptions is `taskdeck doctor`, validated.
type DoctorOptions struct {
	f      *Factory
	ctx    context.Context
	Server model.ServerRef
	JSON   bool
	// Call, when set, is a call the user allows the probe to make, for
	// the hints of the task it starts (then cancelled).
	Call *mcpclient.ProbeCall
}

func newCmdDoctor(f *Factory, runF func(*DoctorOptions) error) *cobra.Command {
	opts := &DoctorOptions{f: f}
	var url, call, args string
	cmd := &cobra.Command{
		Use:   "doctor (SERVER | --url URL) [--call TOOL [--args JSON]] [--json]",
		Short: "Probe what a server supports: revision, tasks, push, tools, and what would break",
		Long: `doctor connects to one server and says which MCP revision it speaks, whether
it offers the tasks extension and push (and whether a listen is
acknowledged), how it answers tasks/get of a task it never made (the task id
in Mcp-Name), and which of its tools can answer with a task; then what would
break, each with its remedy. It starts no task, unless --call names a tool
(with --args, a JSON object): that call is made once, for what the task it
starts says (pollIntervalMs, ttlMs, the input it asks for: a server
advertises none of them before a task), and the task is then cancelled.
Every request is bounded by the request timeout, the whole probe by four of
them (six with --call).

Exit 0: nothing would break; 1: something would (listed); 3: the server could
not be reached or did not answer in time.`,
		Args: cobra.ArbitraryArgs, // checked below, as a usage error
		ValidArgsFunction: func(cmd *cobra.Command, args []string, prefix string) ([]string, cobra.ShellCompDirective) {
			return f.completeServers(cmd, args, prefix)
		},
		RunE: func(cmd *cobra.Command, pos []string) error {
			if len(pos) > 1 || (len(pos) == 1) == (url != "") {
				return usageErr("name one server: doctor SERVER, or doctor --url URL")
			}
			name := ""
			if len(pos) == 1 {
				name = pos[0]
			}
			var err error
			if opts.Server, err = serverRef(name, url); err != nil {
				return err
			}
			switch {
			case call != "":
				raw, err := engine.NormalizeArgs(json.RawMessage(args))
				if err != nil {
					return usageErr("--args: %v", err)
				}
				opts.Call = &mcpclient.ProbeCall{Tool: call, Args: raw}
			case args != "":
				return usageErr("--args goes with --call TOOL")
			}
			opts.ctx = cmd.Context()
			if runF != nil {
				return runF(opts)
			}
			return doctorRun(opts)
		},
	}
	cmd.Flags().StringVar(&url, "url", "", "ad-hoc server URL")
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print the diagnosis as one JSON object")
	cmd.Flags().StringVar(&call, "call", "", "call this tool once for the hints of the task it starts (then cancelled)")
	cmd.Flags().StringVar(&args, "args", "", "the --call's arguments, a JSON object (default {})")
	return cmd
}

func doctorRun(opts *DoctorOptions) error {
	f := opts.f
	cfg, err := f.config()
	if err != nil {
		return err
	}
	if opts.Server.Name != "" {
		if _, err := cfg.Server(opts.Server.Name); err != nil {
			return &exitError{code: exitUsage, err: err}
		}
	}
	// The probe needs no store: its own pool, closed when it is done.
	pool := mcpclient.NewPool(mcpclient.PoolOptions{Config: cfg, RequestTimeout: f.requestTimeout, Warn: func(msg string) {
		fmt.Fprintf(f.stderr, "taskdeck: warning: %s\n", msg)
	}})
	defer pool.Close()
	var d *mcpclient.Diagnosis
	if opts.Call != nil {
		ctx, cancel := context.WithTimeout(opts.ctx, 6*f.requestTimeout)
		defer cancel()
		d = pool.DiagnoseCall(ctx, opts.Server, *opts.Call)
	} else {
		ctx, cancel := context.WithTimeout(opts.ctx, 4*f.requestTimeout)
		defer cancel()
		d = pool.Diagnose(ctx, opts.Server)
	}
	if opts.JSON {
		b, err := json.Marshal(d)
		if err != nil {
			return err
		}
		fmt.Fprintf(f.stdout, "%s\n", b)
	} else {
		printDiagnosis(f, d)
	}
	switch {
	case errors.Is(opts.ctx.Err(), context.Canceled):
		return errInterrupted
	case !d.Reached:
		return &exitError{code: exitUnreachable, err: fmt.Errorf("server %s: %s", d.Server, d.Problems[0].What)}
	case len(d.Problems) > 0:
		return &exitError{code: exitTaskBad, err: fmt.Errorf("server %s: %d thing(s) would break (listed above)", d.Server, len(d.Problems))}
	}
	return nil
}

func printDiagnosis(f *Factory, d *mcpclient.Diagnosis) {
	w := f.stdout
	line := func(k, v string) { fmt.Fprintf(w, "%-13s %s\n", k, termtext.Line(v)) }
	name := d.Server
	if d.ServerName != "" {
		name += " (" + strings.TrimSpace(d.ServerName+" "+d.ServerVersion) + ")"
	}
	line("server", name)
	if d.Reached {
		line("revision", d.Revision)
		line("tasks", map[bool]string{true: "offered", false: "not offered"}[d.Tasks])
		switch {
		case !d.Tasks:
		case d.Push && d.Acknowledged:
			line("push", "a listen is answered, and acknowledged a task id the server never made")
		case d.Push:
			line("push", "a listen is answered with a stream and an acknowledgement (of none of a made-up task id, rightly); whether real tasks are pushed shows with one (taskdeck servers: push up)")
		default:
			line("push", "no listen answered: "+d.PushWhy+"; taskdeck polls")
		}
		if d.UnknownTask == "-32602" {
			line("Mcp-Name", "tasks/get of a task it never made is answered -32602 (unknown task), as the spec says")
		} else if d.UnknownTask != "" {
			line("Mcp-Name", "tasks/get of a task it never made: "+d.UnknownTask)
		}
		tools := fmt.Sprintf("%d listed, %d can answer with a task", d.Tools, len(d.TaskTools))
		if len(d.TaskTools) > 0 {
			tools += ": " + strings.Join(d.TaskTools, ", ")
		}
		line("tools", tools)
		switch {
		case d.Sample != nil:
			printSample(line, d.Sample)
		case d.Tasks:
			line("hints", "pollIntervalMs and ttlMs come with each task (doctor starts none; --call TOOL starts one and cancels it): taskdeck polls at the first, or every 1 s, up to 30 s")
			line("input", "taskdeck asks for form and url elicitation; what the server asks comes with each task")
		}
	}
	if len(d.Problems) == 0 {
		line("problems", "none")
		return
	}
	for _, p := range d.Problems {
		line("problem", p.What)
		line("  remedy", p.Remedy)
	}
}

// printSample says what the task of doctor --call told.
func printSample(line func(k, v string), s *mcpclient.TaskSample) {
	ms := func(p *int64, none string) string {
		if p == nil {
			return none
		}
		return (time.Duration(*p) * time.Millisecond).String()
	}
	switch s.Answer {
	case "task":
		end := "cancelled"
		if !s.Cancelled {
			end = "left as it was (" + s.Status + ")"
			if s.CancelErr != "" {
				end = "not cancelled: " + s.CancelErr
			}
		}
		line("hints", fmt.Sprintf("pollIntervalMs %s, ttlMs %s (task %s of %s, %s)", ms(s.PollIntervalMs, "not given (taskdeck polls every 1 s, up to 30 s)"),
			ms(s.TTLMs, "unlimited"), s.TaskID, s.Tool, end))
	case "input":
		line("hints", s.Tool+" asked for input before starting a task: no task, no hints")
	default:
		line("hints", s.Tool+" answered at once with its result: no task, no hints")
	}
	if len(s.InputKinds) > 0 {
		line("input", s.Tool+" asked for "+strings.Join(s.InputKinds, ", "))
	}
}
