package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/taskdeck/taskdeck/mcpclient/legacy"
	"github.com/taskdeck/taskdeck/mcpclient/wire"
	"github.com/taskdeck/taskdeck/model"
)

// Diagnosis is what one probe of a server found (`taskdeck doctor`). Every
// step is bounded by the pool's request timeout; a step that fails is
// said in one line and the probe goes on where it can.
type Diagnosis struct {
	Server        string `json:"server"`
	Reached       bool   `json:"reached"`
	Revision      string `json:"revision,omitempty"` // wire.ProtocolVersion or legacy.ProtocolVersion
	ServerName    string `json:"serverName,omitempty"`
	ServerVersion string `json:"serverVersion,omitempty"`
	// Tasks: the server offers the tasks extension (2026-07-28) or
	// task-augmented tools/call (2025-11-25).
	Tasks bool `json:"tasks"`
	// Push: a subscriptions/listen of a made-up task id was answered
	// with a stream and an acknowledgement; Acknowledged: of that id
	// (which no server should). Whether a real task is pushed shows only
	// with one. PushWhy says why no listen was answered.
	Push         bool   `json:"listenAnswered"`
	Acknowledged bool   `json:"listenAcknowledgedMadeUpID"`
	PushWhy      string `json:"pushWhy,omitempty"`
	// UnknownTask is how the server answered tasks/get of a task id it
	// cannot know, sent with that id in Mcp-Name: "-32602" as the spec
	// says, or what it said instead.
	UnknownTask string `json:"unknownTaskAnswer,omitempty"`
	// Tools is how many tools it lists; TaskTools those that can answer
	// with a task (2026-07-28: the server decides per call, so every one;
	// 2025-11-25: execution.taskSupport optional or required).
	Tools     int      `json:"tools"`
	TaskTools []string `json:"taskTools,omitempty"`
	// Sample is what one task said, when the probe was allowed to start
	// one (DiagnoseCall); nil otherwise.
	Sample *TaskSample `json:"sample,omitempty"`
	// Problems is what would break, each with its remedy.
	Problems []Problem `json:"problems,omitempty"`
}

// TaskSample is what a real call of a tool answered: the hints a task
// carries (a server advertises none before it makes one), and the kinds
// of input it asked for.
type TaskSample struct {
	Tool string `json:"tool"`
	// Answer: "task", "result" (at once, no task) or "input" (asked
	// before any task: input_required with no task yet).
	Answer string `json:"answer"`
	TaskID string `json:"taskId,omitempty"`
	Status string `json:"status,omitempty"`
	// PollIntervalMs is the interval the server asks for (nil: none
	// given); TTLMs its lifetime from creation (nil: unlimited or none).
	PollIntervalMs *int64 `json:"pollIntervalMs,omitempty"`
	TTLMs          *int64 `json:"ttlMs,omitempty"`
	// InputKinds are the methods of the input requests it sent.
	InputKinds []string `json:"inputKinds,omitempty"`
	// Cancelled: the task was cancelled after it was read, so that the
	// probe leaves nothing running; CancelErr says why not.
	Cancelled bool   `json:"cancelled"`
	CancelErr string `json:"cancelError,omitempty"`
}

// Problem is one thing that would break, and what to do about it.
type Problem struct {
	What   string `json:"what"`
	Remedy string `json:"remedy"`
}

// probeTaskID names no task any server made: tasks/get of it must be
// answered "unknown task".
const probeTaskID = "taskdeck-doctor-probe-0000"

// Diagnose probes ref through the pool: connect (revision, extension),
// tools/list, tasks/get of a task that cannot exist, and a listen for it.
// It starts no task and answers nothing.
func (p *Pool) Diagnose(ctx context.Context, ref model.ServerRef) *Diagnosis {
	return p.diagnose(ctx, ref, nil)
}

// ProbeCall is a call the user allows the probe to make.
type ProbeCall struct {
	Tool string
	Args json.RawMessage // a JSON object; empty: {}
}

// DiagnoseCall is Diagnose, then call (the user's tool and arguments) is
// made once, for the hints of the task it starts, which is then
// cancelled: a server advertises no poll interval or TTL before a task.
func (p *Pool) DiagnoseCall(ctx context.Context, ref model.ServerRef, call ProbeCall) *Diagnosis {
	return p.diagnose(ctx, ref, &call)
}

func (p *Pool) diagnose(ctx context.Context, ref model.ServerRef, call *ProbeCall) *Diagnosis {
	d := &Diagnosis{Server: RedactedLine(ref.String())}
	sess, err := p.Session(ctx, ref)
	if err != nil {
		d.Problems = append(d.Problems, Problem{What: "cannot connect: " + RedactedLine(err.Error()), Remedy: connectRemedy(err)})
		return d
	}
	defer p.Drop(sess)
	d.Reached, d.Revision, d.Tasks = true, sess.Protocol, sess.SupportsTasks
	d.ServerName, d.ServerVersion = RedactedLine(sess.ServerName), RedactedLine(sess.ServerVersion)
	if !d.Tasks {
		d.Problems = append(d.Problems, Problem{What: "the server offers no tasks: every call waits for its result, and a call cut off (a crash, a timeout) leaves nothing to poll",
			Remedy: "use a server that implements the tasks extension, or keep its calls short"})
	}

	if list, err := sess.Tools(ctx); err != nil {
		d.Problems = append(d.Problems, Problem{What: "tools/list failed: " + RedactedLine(err.Error()), Remedy: "calls go out unchecked; check the server's log"})
	} else {
		d.Tools = len(list.Tools)
		for _, t := range list.Tools {
			if d.Tasks && (sess.legacy == nil || legacy.TaskSupport(list.Sent(t.Name)) != "forbidden") {
				d.TaskTools = append(d.TaskTools, RedactedLine(t.Name))
			}
		}
		slices.Sort(d.TaskTools)
	}

	if d.Tasks {
		_, err := sess.GetTask(ctx, probeTaskID)
		switch {
		case errors.Is(err, ErrTaskUnknown):
			d.UnknownTask = "-32602"
		case err == nil:
			d.UnknownTask = "a task's state"
			d.Problems = append(d.Problems, Problem{What: "tasks/get of a task id it never made was answered with a task's state: the server does not read the task id (Mcp-Name, params.taskId)",
				Remedy: "do not trust its task states; report it to the server's authors"})
		default:
			d.UnknownTask = RedactedLine(err.Error())
			d.Problems = append(d.Problems, Problem{What: "tasks/get of an unknown task was not answered -32602: " + d.UnknownTask,
				Remedy: "a task the server forgot would not be marked unknown but retried until its TTL; report it to the server's authors"})
		}
	}

	if d.Tasks {
		sub, err := sess.Listen(ctx, []string{probeTaskID})
		var np *noPushError
		switch {
		case errors.As(err, &np) && np.answered:
			d.Push = true // a stream and an acknowledgement, rightly of none
		case err == nil:
			d.Push, d.Acknowledged = true, slices.Contains(sub.Acknowledged(), probeTaskID)
			sub.Close()
			if d.Acknowledged {
				d.Problems = append(d.Problems, Problem{What: "the listen acknowledged a task id the server never made",
					Remedy: "taskdeck polls pushed tasks now and then all the same (its safety poll); nothing to do"})
			}
		case errors.Is(err, ErrNoPush):
			d.PushWhy = RedactedLine(err.Error())
		default:
			d.PushWhy = RedactedLine(err.Error())
			d.Problems = append(d.Problems, Problem{What: "subscriptions/listen failed: " + d.PushWhy, Remedy: "taskdeck polls instead, and tries the listen again with backoff"})
		}
	}
	if call != nil {
		d.sample(ctx, sess, *call)
	}
	return d
}

// sample makes call once and reads what came back; a task it started is
// cancelled.
func (d *Diagnosis) sample(ctx context.Context, sess *Session, call ProbeCall) {
	s := &TaskSample{Tool: RedactedLine(call.Tool)}
	cctx, cancel := context.WithTimeout(ctx, sess.timeout)
	out, err := sess.CallTool(cctx, call.Tool, call.Args, nil, "")
	cancel()
	if err != nil {
		d.Problems = append(d.Problems, Problem{What: "the call of " + s.Tool + " failed: " + RedactedLine(err.Error()),
			Remedy: "check the tool's name and --args (taskdeck tools " + d.Server + " lists them); the hints come with a task"})
		return
	}
	d.Sample = s
	inputs := out.InputRequests
	switch {
	case out.Task != nil:
		s.Answer, s.TaskID, s.Status = "task", RedactedLine(out.Task.TaskID), string(out.Task.Status)
		s.PollIntervalMs, s.TTLMs = out.Task.PollIntervalMs, out.Task.TTLMs
		inputs = out.Task.InputRequests
		if !out.Task.Status.Terminal() {
			cctx, cancel := context.WithTimeout(ctx, sess.timeout)
			if err := sess.CancelTask(cctx, out.Task.TaskID); err != nil {
				s.CancelErr = RedactedLine(err.Error())
			} else {
				s.Cancelled = true
			}
			cancel()
		}
	case len(inputs) > 0:
		s.Answer = "input"
	default:
		s.Answer = "result"
	}
	for _, r := range inputs {
		if !slices.Contains(s.InputKinds, r.Method) {
			s.InputKinds = append(s.InputKinds, RedactedLine(r.Method))
		}
	}
	slices.Sort(s.InputKinds)
	if s.CancelErr != "" {
		d.Problems = append(d.Problems, Problem{What: "the task the probe started (" + s.TaskID + ") could not be cancelled: " + s.CancelErr,
			Remedy: "it runs on at the server until it ends or its TTL does; cancel it there"})
	}
}

// connectRemedy is what to do about a failed connect.
func connectRemedy(err error) string {
	var te *TransportError
	switch {
	case errors.As(err, new(*RedirectError)):
		return "taskdeck does not follow redirects (they could carry its headers elsewhere): configure the URL the server redirects to, if it is the server's own"
	case errors.Is(err, context.DeadlineExceeded):
		return "the server accepts connections but does not answer: check that it runs and is not stuck; --request-timeout waits longer"
	case errors.As(err, &te):
		return "check the URL (or command), that the server runs, and that it speaks MCP over streamable HTTP or stdio"
	}
	return fmt.Sprintf("taskdeck needs MCP %s (the tasks extension) or %s (the tasks capability)", wire.ProtocolVersion, legacy.ProtocolVersion)
}
