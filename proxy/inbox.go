package proxy

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/termtext"
)

// InboxPath is where the proxy serves the operators' inbox: an MCP
// endpoint whose tools list, show and answer what waits for a person.
const InboxPath = "/inbox"

// inboxMax bounds the tasks one inbox_list returns; the rest are counted.
const inboxMax = 200

// inboxHandler serves InboxPath to principals with the operator role
// (the gate has run: the request has a known token and no browser's
// Origin or foreign Host). It is stateless: every request makes its
// server for the principal of its own token, so an answer is attributed
// to whoever sent it, never to a session's first caller.
func (p *Proxy) inboxHandler() http.Handler {
	mcpH := mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		return p.inboxServer(principalOf(r.Context()))
	}, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pr := principalOf(r.Context())
		if pr.who.Role != model.RoleOperator {
			p.log.Warn("proxy: refused the inbox to a principal without the operator role", "principal", pr.who.Name, "role", pr.who.Role)
			writeHTTPError(w, http.StatusForbidden, nil, jsonrpc.CodeInvalidRequest,
				fmt.Sprintf("the inbox is for operators: %q has the role %q (give it \"role\": \"operator\" under \"agents\", or use the proxy's --token)", pr.who.Name, pr.who.Role))
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, p.opts.MaxBody)
		mcpH.ServeHTTP(w, r)
	})
}

// InboxItem is one task that waits for a person, as inbox_list gives it.
type InboxItem struct {
	Task   string `json:"task"`
	Server string `json:"server"`
	Tool   string `json:"tool"`
	// Agent is who made the call: the principal that owns it and the
	// agent's self-reported name, where there are.
	Agent     string     `json:"agent,omitempty"`
	Questions []Question `json:"questions"`
	// WaitingSince is when it began to wait; WaitedSeconds how long ago.
	WaitingSince  time.Time `json:"waitingSince"`
	WaitedSeconds int64     `json:"waitedSeconds"`
}

// Question is one input request still to answer. Its texts are the
// server's, stripped of control sequences.
type Question struct {
	Key     string `json:"key"`
	Kind    string `json:"kind"` // "form", "url", or the request's method
	Message string `json:"message,omitempty"`
	URL     string `json:"url,omitempty"`
	// Schema is the form's requestedSchema, as JSON schema (inbox_show only).
	// (The JSON fields are any: go-sdk infers an array's schema for a
	// json.RawMessage and would refuse the object.)
	Schema any `json:"schema,omitempty"`
}

type inboxListIn struct {
	Server string `json:"server,omitempty" jsonschema:"only this server's tasks"`
}

type inboxListOut struct {
	Waiting []InboxItem `json:"waiting"`
	// More counts the waiting tasks past the first 200, left out.
	More int `json:"more,omitempty"`
}

type taskIn struct {
	Task string `json:"task" jsonschema:"the task's id, as inbox_list gives it"`
}

type inboxShowOut struct {
	InboxItem
	Status    model.Status `json:"status"`
	Arguments any          `json:"arguments,omitempty"`
}

type inboxAnswerIn struct {
	Task    string         `json:"task" jsonschema:"the task's id, as inbox_list gives it"`
	Key     string         `json:"key" jsonschema:"the question's key"`
	Action  string         `json:"action,omitempty" jsonschema:"accept (the default), decline or cancel"`
	Content map[string]any `json:"content,omitempty" jsonschema:"the form's answers, by field name (for accept)"`
}

// TaskStatus is what task_status and inbox_answer give about a task.
type TaskStatus struct {
	Task          string       `json:"task"`
	Server        string       `json:"server"`
	Tool          string       `json:"tool"`
	Status        model.Status `json:"status"`
	StatusMessage string       `json:"statusMessage,omitempty"`
	Waiting       []string     `json:"waiting,omitempty"` // keys still to answer
	Answers       []AnswerSeen `json:"answers,omitempty"`
	Result        any          `json:"result,omitempty"`
	Error         string       `json:"error,omitempty"`
}

// AnswerSeen is one answer given, and by whom.
type AnswerSeen struct {
	Key     string    `json:"key"`
	By      string    `json:"by,omitempty"`
	At      time.Time `json:"at"`
	Refused bool      `json:"refused,omitempty"`
}

// inboxServer is the inbox's MCP server for one operator.
func (p *Proxy) inboxServer(pr principal) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "taskdeck-inbox", Version: "1"}, nil)
	ro := &mcp.ToolAnnotations{ReadOnlyHint: true}
	mcp.AddTool(s, &mcp.Tool{Name: "inbox_list", Annotations: ro,
		Description: "The tasks that wait for a person's answer: task, server, tool, agent, the questions, and how long each has waited (longest first)."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in inboxListIn) (*mcp.CallToolResult, inboxListOut, error) {
			out, err := p.inboxList(acting(ctx, pr, ""), pr, in.Server)
			return nil, out, err
		})
	mcp.AddTool(s, &mcp.Tool{Name: "inbox_show", Annotations: ro,
		Description: "One waiting task with its questions, each form as the JSON schema its answer's content must fit."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in taskIn) (*mcp.CallToolResult, inboxShowOut, error) {
			out, err := p.inboxShow(acting(ctx, pr, ""), pr, in.Task)
			return nil, out, err
		})
	mcp.AddTool(s, &mcp.Tool{Name: "inbox_answer",
		Description: "Answer one question of a waiting task: checked against its form as the dashboard checks it, then sent to the server in your name."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in inboxAnswerIn) (*mcp.CallToolResult, TaskStatus, error) {
			out, err := p.inboxAnswer(acting(ctx, pr, ""), pr, in)
			return nil, out, err
		})
	mcp.AddTool(s, &mcp.Tool{Name: "task_status", Annotations: ro,
		Description: "A task's status, what it still waits for, the answers given and by whom, and its result once it has ended."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in taskIn) (*mcp.CallToolResult, TaskStatus, error) {
			rec, err := p.inboxTask(acting(ctx, pr, ""), pr, in.Task)
			if err != nil {
				return nil, TaskStatus{}, err
			}
			return nil, taskStatus(rec), nil
		})
	return s
}

func (p *Proxy) inboxList(ctx context.Context, pr principal, server string) (inboxListOut, error) {
	entries, err := p.opts.Deck.List(ctx, deck.Filter{Statuses: []model.Status{model.StatusInputRequired}, Server: server})
	if err != nil {
		return inboxListOut{}, err
	}
	out := inboxListOut{Waiting: []InboxItem{}}
	now := time.Now()
	for _, e := range entries {
		if e.Task.WaitsForInput() && pr.may(e.Task.Server.Name) {
			out.Waiting = append(out.Waiting, inboxItem(e.Task, now, false))
		}
	}
	slices.SortStableFunc(out.Waiting, func(a, b InboxItem) int { return a.WaitingSince.Compare(b.WaitingSince) })
	if len(out.Waiting) > inboxMax {
		out.More, out.Waiting = len(out.Waiting)-inboxMax, out.Waiting[:inboxMax]
	}
	return out, nil
}

func (p *Proxy) inboxShow(ctx context.Context, pr principal, id string) (inboxShowOut, error) {
	rec, err := p.inboxTask(ctx, pr, id)
	if err != nil {
		return inboxShowOut{}, err
	}
	if !rec.WaitsForInput() {
		return inboxShowOut{}, fmt.Errorf("task %s waits for no answer: it is %s (task_status tells more)", rec.ID, rec.Status)
	}
	return inboxShowOut{InboxItem: inboxItem(rec, time.Now(), true), Status: rec.Status, Arguments: rawOrNil(rec.Arguments)}, nil
}

// inboxAnswer answers through the Deck, as the dashboard does (Answer, or
// Continue before the task exists), so the engine checks the answer
// against its form and records the operator as who answered.
func (p *Proxy) inboxAnswer(ctx context.Context, pr principal, in inboxAnswerIn) (TaskStatus, error) {
	rec, err := p.inboxTask(ctx, pr, in.Task)
	if err != nil {
		return TaskStatus{}, err
	}
	if in.Key == "" {
		return TaskStatus{}, fmt.Errorf("name the question's key (task %s asks for: %v)", rec.ID, rec.PendingInputs())
	}
	// A key answered on a task that has moved on is not the engine's to
	// explain (to it the task simply waits for nothing): say who answered.
	if w, ok := rec.LastAnswer(in.Key); ok && !w.Refused && !slices.Contains(rec.PendingInputs(), in.Key) {
		return TaskStatus{}, fmt.Errorf("task %s: input %q is no longer outstanding: it was answered with %s by %s at %s; this answer was not sent",
			rec.ID, in.Key, termtext.OneLine(termtext.Line(string(w.Response)), 200), orUnknown(w.Who()), w.At.UTC().Format(time.RFC3339))
	}
	resp := map[string]any{"action": cmp.Or(in.Action, "accept")}
	if in.Content != nil {
		resp["content"] = in.Content
	}
	raw, err := json.Marshal(resp)
	if err != nil {
		return TaskStatus{}, err
	}
	answers := map[string]json.RawMessage{in.Key: raw}
	var after *model.Task
	if rec.NeedsInput() {
		var res deck.CallResult
		res, err = p.opts.Deck.Continue(ctx, rec.ID, answers)
		after = res.Task
	} else {
		after, err = p.opts.Deck.Answer(ctx, rec.ID, answers)
	}
	if err != nil {
		return TaskStatus{}, err
	}
	return taskStatus(after), nil
}

// inboxTask reads a task an operator may see: one of its servers', by
// its exact id.
func (p *Proxy) inboxTask(ctx context.Context, pr principal, id string) (*model.Task, error) {
	if id == "" {
		return nil, errors.New("name the task: its id, as inbox_list gives it")
	}
	// The Deck's words for an unknown id: whether it exists is not this
	// operator's to learn. Exact ids only, as at /mcp/<server>: a prefix
	// could tell, by being ambiguous, of other servers' tasks.
	unknown := deck.Errorf(deck.KindNotFound, "no task %q; `taskdeck ls` lists them", id)
	if !model.ValidID(id) {
		return nil, unknown
	}
	e, err := p.opts.Deck.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if !pr.may(e.Task.Server.Name) {
		return nil, unknown
	}
	return e.Task, nil
}

func inboxItem(t *model.Task, now time.Time, schema bool) InboxItem {
	since := t.WaitingSince()
	it := InboxItem{Task: t.ID, Server: t.Server.Name, Tool: t.Tool, Agent: agentOf(t),
		WaitingSince: since, WaitedSeconds: int64(now.Sub(since) / time.Second), Questions: []Question{}}
	if it.Server == "" {
		it.Server = t.Server.URL
	}
	for _, k := range t.PendingInputs() {
		it.Questions = append(it.Questions, question(k, t.InputRequests[k], schema))
	}
	return it
}

func question(key string, req model.InputRequest, schema bool) Question {
	q := Question{Key: key, Kind: req.Method}
	e, err := req.Elicitation()
	if err != nil {
		return q
	}
	q.Kind, q.Message, q.URL = e.Mode, termtext.Line(e.Message), termtext.Line(e.URL)
	if schema && e.Mode == "form" {
		var p struct {
			RequestedSchema json.RawMessage `json:"requestedSchema"`
		}
		if json.Unmarshal(req.Params, &p) == nil {
			q.Schema = rawOrNil(p.RequestedSchema)
		}
	}
	return q
}

// agentOf names who made a task's call: its owner and, beside it, the
// agent's self-reported name.
func agentOf(t *model.Task) string {
	switch {
	case t.Owner != "" && t.Agent != "" && t.Agent != t.Owner:
		return t.Owner + " (" + termtext.Line(t.Agent) + ")"
	case t.Owner != "":
		return t.Owner
	}
	return termtext.Line(t.Agent)
}

func taskStatus(t *model.Task) TaskStatus {
	s := TaskStatus{Task: t.ID, Server: t.Server.Name, Tool: t.Tool, Status: t.Status,
		StatusMessage: termtext.Line(t.StatusMessage), Waiting: t.PendingInputs(), Result: rawOrNil(t.Result)}
	if s.Server == "" {
		s.Server = t.Server.URL
	}
	if t.Status != model.StatusInputRequired {
		s.Waiting = nil
	}
	for _, a := range t.Answers {
		s.Answers = append(s.Answers, AnswerSeen{Key: a.Key, By: a.Who(), At: a.At, Refused: a.Refused})
	}
	switch {
	case t.Error != nil:
		s.Error = termtext.Line(t.Error.Message)
	case t.LocalError != "":
		s.Error = termtext.Line(t.LocalError)
	}
	return s
}

func orUnknown(s string) string {
	if s == "" {
		return "someone unrecorded"
	}
	return s
}

// rawOrNil is raw as an any that omitempty leaves out when raw is empty.
func rawOrNil(raw json.RawMessage) any {
	if len(raw) == 0 {
		return nil
	}
	return raw
}
