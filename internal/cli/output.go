package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/present"
	"github.com/taskdeck/taskdeck/termtext"
)

// taskJSON is the --json shape of a task: stable field names for scripts.
type taskJSON struct {
	ID              string                        `json:"id"`
	TaskID          string                        `json:"taskId,omitempty"`
	Protocol        string                        `json:"protocol,omitempty"` // the MCP revision of its server: 2025-11-25, or absent for 2026-07-28
	Server          string                        `json:"server"`
	Tool            string                        `json:"tool"`
	Arguments       json.RawMessage               `json:"arguments,omitempty"`
	Key             string                        `json:"key,omitempty"`
	Agent           string                        `json:"agent,omitempty"`   // the MCP agent that made the call through the proxy
	Owner           string                        `json:"owner,omitempty"`   // the agent principal (by its credential) whose task it is
	Repeats         string                        `json:"repeats,omitempty"` // the task a re-run repeats
	Status          model.Status                  `json:"status"`
	StatusMessage   string                        `json:"statusMessage,omitempty"`
	CreatedAt       time.Time                     `json:"createdAt"`
	UpdatedAt       time.Time                     `json:"updatedAt"`
	InputRequests   map[string]model.InputRequest `json:"inputRequests,omitempty"`
	AnsweredKeys    []string                      `json:"answeredKeys,omitempty"`
	Result          json.RawMessage               `json:"result,omitempty"`
	IsError         bool                          `json:"isError,omitempty"`
	Error           *model.RPCError               `json:"error,omitempty"`
	LocalError      string                        `json:"localError,omitempty"`
	CancelRequested bool                          `json:"cancelRequested,omitempty"`
	History         []model.Transition            `json:"history,omitempty"`
	// Answers is what was answered to its input requests, when and by whom.
	Answers []model.AnsweredInput `json:"answers,omitempty"`
	// LastAct is the record's last change and who made it.
	LastAct *model.Act `json:"lastAct,omitempty"`
	// LaunchedBy is who made the call (an agent's role is "agent" or
	// "operator": through the proxy); its host is set on a fleet.
	LaunchedBy *model.Actor `json:"launchedBy,omitempty"`
	// Engine is the engine that made the intent on a fleet (host/pid).
	Engine string `json:"engine,omitempty"`
	// WaitingSince is when it began to wait for an answer (while it does).
	WaitingSince time.Time `json:"waitingSince,omitzero"`
	// ExpiresAt is when its server drops it (createdAt + ttl), where the server set a TTL.
	ExpiresAt time.Time `json:"expiresAt,omitzero"`
	// Watcher is the engine (host/pid/random) that polls it on a shared
	// store; NoEngine: no live engine there can reach its server.
	Watcher  string `json:"watcher,omitempty"`
	NoEngine bool   `json:"noEngine,omitempty"`
}

func toJSON(t *model.Task) taskJSON {
	return taskJSON{
		ID: t.ID, TaskID: t.TaskID, Protocol: t.Protocol, Server: t.Server.String(), Tool: t.Tool, Arguments: t.Arguments,
		Key: t.IdempotencyKey, Agent: t.Agent, Owner: t.Owner, Repeats: t.Repeats, Status: t.Status, StatusMessage: t.StatusMessage,
		CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt, InputRequests: t.InputRequests,
		AnsweredKeys: t.AnsweredKeys, Result: t.Result, IsError: t.IsError, Error: t.Error,
		LocalError: t.LocalError, CancelRequested: t.CancelRequested, History: t.History,
		Answers: t.Answers, LastAct: t.Act, WaitingSince: waitingSince(t), ExpiresAt: t.Deadline(),
		LaunchedBy: launcher(t), Engine: t.Engine,
	}
}

// launcher is who made the call: the actor of the record's first move,
// to calling (nil for a record made before acts were kept).
func launcher(t *model.Task) *model.Actor {
	if len(t.History) == 0 || t.History[0].To != model.StatusCalling || t.History[0].By.IsZero() {
		return nil
	}
	by := t.History[0].By
	return &by
}

// launchedBy words launcher for `get`: who, through what, from where.
func launchedBy(t *model.Task) string {
	by := launcher(t)
	if by == nil {
		return ""
	}
	s := present.Actor(*by)
	switch by.Role {
	case model.RoleAgent, model.RoleOperator, model.RoleViewer:
		s += ", through the proxy"
	}
	if t.Engine != "" {
		s += ", on engine " + termtext.OneLine(termtext.Line(t.Engine), 80)
	}
	return s
}

// waitingSince is when a task that waits for an answer began to wait.
func waitingSince(t *model.Task) time.Time {
	if !t.WaitsForInput() {
		return time.Time{}
	}
	return t.WaitingSince()
}

// printJSON writes one task as one line of JSON. encoding/json escapes
// C0 controls (ESC, BEL, NUL…); inertJSON escapes what it leaves raw, so
// hostile text stays inert on a terminal and the line valid.
func printJSON(w io.Writer, t *model.Task) error { return writeJSON(w, toJSON(t)) }

// printEntryJSON is printJSON with the engine that watches the task.
func printEntryJSON(w io.Writer, e deck.Entry) error {
	j := toJSON(e.Task)
	j.Watcher, j.NoEngine = e.Poll.Watcher, e.Poll.NoEngine
	return writeJSON(w, j)
}

func writeJSON(w io.Writer, j taskJSON) error {
	b, err := json.Marshal(j)
	if err != nil {
		return err
	}
	_, err = w.Write(append(inertJSON(b), '\n'))
	return err
}

// inertJSON escapes DEL, C1 controls (U+0080–U+009F, e.g. the 8-bit CSI
// U+009B) and bidi controls as \uXXXX, and turns bytes that are not UTF-8
// into \ufffd: server JSON kept raw (a result) reaches the output as the
// server sent it, and a lone 0x9b byte is an 8-bit CSI to many terminals.
// Valid JSON holds such bytes only inside strings, where the escape is a
// character of the same meaning.
func inertJSON(b []byte) []byte {
	if utf8.Valid(b) && !slices.ContainsFunc([]rune(string(b)), needsEscape) {
		return b
	}
	var out bytes.Buffer
	for _, r := range string(b) { // a byte that is not UTF-8 reads as U+FFFD
		if needsEscape(r) || r == utf8.RuneError {
			fmt.Fprintf(&out, `\u%04x`, r)
		} else {
			out.WriteRune(r)
		}
	}
	return out.Bytes()
}

func needsEscape(r rune) bool {
	return r == 0x7f || r >= 0x80 && r <= 0x9f || termtext.IsBidiControl(r)
}

// printer reports changes of followed tasks, one line each.
type printer struct {
	w, errw io.Writer
	asJSON  bool
	seen    map[string]string // id → last printed state
}

func (f *Factory) printer(asJSON bool) *printer {
	return &printer{w: f.stdout, errw: f.stderr, asJSON: asJSON, seen: map[string]string{}}
}

// change prints a task if its status or message moved since last time.
func (p *printer) change(t *model.Task) {
	state := string(t.Status) + "\x00" + t.StatusMessage + "\x00" + strings.Join(t.PendingInputs(), ",")
	if p.seen[t.ID] == state {
		return
	}
	p.seen[t.ID] = state
	if p.asJSON {
		printJSON(p.w, t)
		return
	}
	by := ""
	if t.Act != nil && t.Act.Actor.Role != model.RoleEngine {
		by = "  (" + present.Act(t.Act) + ")"
	}
	fmt.Fprintf(p.w, "%s  %s  %-14s %s  %s%s\n", time.Now().Format("15:04:05"), t.ID,
		t.Status, termtext.Line(t.Tool), termtext.Line(t.StatusMessage), by)
	switch {
	case t.Status == model.StatusInputRequired:
		printInputs(p.w, t, "    ")
	case t.Status == model.StatusCompleted:
		fmt.Fprintf(p.w, "    %s\n", indent(present.Result(t), "    "))
	case t.Error != nil:
		fmt.Fprintf(p.w, "    error %d: %s\n", t.Error.Code, termtext.Line(t.Error.Message))
	case t.LocalError != "":
		fmt.Fprintf(p.w, "    %s\n", termtext.Line(t.LocalError))
	}
}

// entry prints a change of a followed task, and failed polls as they
// happen.
func (p *printer) entry(e deck.Entry) {
	if e.Poll.Errors > 0 && e.Poll.LastError != "" && !p.asJSON {
		fmt.Fprintf(p.errw, "%s  %s  poll failed, retrying in %s: %s\n", time.Now().Format("15:04:05"),
			e.Task.ID, max(time.Until(e.Poll.Next), 0).Round(time.Millisecond), termtext.Line(e.Poll.LastError))
		return
	}
	p.change(e.Task)
}

// store prints that the database was lost or is back.
func (p *printer) store(st deck.Store) {
	switch {
	case p.asJSON:
		b, _ := json.Marshal(map[string]deck.Store{"store": st}) // a struct of strings, a bool and a time
		_, _ = p.w.Write(append(inertJSON(b), '\n'))
	case st.Up:
		fmt.Fprintf(p.w, "%s  database back; polling resumes\n", st.Since.Format("15:04:05"))
	default:
		fmt.Fprintf(p.w, "%s  database unreachable: %s; polling paused, retrying\n", st.Since.Format("15:04:05"), termtext.Line(st.Error))
	}
}

// reconcile prints what the start-up reconcile found.
func (p *printer) reconcile(r *deck.Reconcile) {
	if !p.asJSON {
		fmt.Fprintf(p.w, "reconciled: %d re-attached · %d finished meanwhile · %d unknown · %d orphaned · %d unreachable\n",
			r.Reattached, r.Finished, r.Unknown, r.Orphaned, r.Unreachable)
	}
}

func printInputs(w io.Writer, t *model.Task, pad string) {
	for _, in := range present.Inputs(t) {
		fmt.Fprintf(w, "%sinput %s: %s\n", pad, in.Key, in.Message)
		switch {
		case in.Err != "":
			fmt.Fprintf(w, "%s  cannot be answered here: %s\n", pad, in.Err)
			continue
		case in.URL != "":
			fmt.Fprintf(w, "%s  open %s, then:\n", pad, in.URL)
		case len(in.Fields) > 0:
			fmt.Fprintf(w, "%s  fields: %s\n", pad, strings.Join(in.Fields, ", "))
		}
		fmt.Fprintf(w, "%s  answer: taskdeck answer %s %s '%s'\n", pad, t.ID, in.Key, in.Example)
	}
}

// taskTable is ls's table, printed a page at a time so that what ls holds
// is one page however many records the store keeps: the header once, the
// columns aligned within each page (as kubectl's chunked lists). The
// first page decides the AGENT column (also there when more pages may
// follow, so that an older task's agent is never left out) and the
// WATCHER column (a fleet's open tasks).
type taskTable struct {
	w              io.Writer
	configured     []deck.Server
	now            time.Time
	started        bool
	agents, shared bool
}

func (p *taskTable) page(entries []deck.Entry, more bool) error {
	tw := tabwriter.NewWriter(p.w, 0, 0, 2, ' ', 0)
	if !p.started {
		p.started = true
		p.shared = slices.ContainsFunc(entries, func(e deck.Entry) bool { return e.Poll.Watcher != "" || e.Poll.NoEngine })
		// As the dashboard's table: an AGENT column once a record names one.
		p.agents = more || slices.ContainsFunc(entries, func(e deck.Entry) bool { return e.Task.Agent != "" })
		head := "ID\tSTATUS\tSERVER\tTOOL\t"
		if p.agents {
			head += "AGENT\t"
		}
		head += "AGE\t"
		if p.shared {
			head += "WATCHER\t"
		}
		fmt.Fprintln(tw, head+"MESSAGE")
	}
	for _, e := range entries {
		t := e.Task
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t", t.ID, present.StatusText(t), termtext.OneLine(present.ServerName(t.Server, p.configured), 24),
			termtext.OneLine(termtext.Line(t.Tool), 20))
		if p.agents {
			agent := "-" // the local user's own call: a cell still, so columns line up
			if t.Agent != "" {
				agent = termtext.OneLine(termtext.Line(t.Agent), 20)
			}
			fmt.Fprintf(tw, "%s\t", agent)
		}
		fmt.Fprintf(tw, "%s\t", present.Age(p.now.Sub(t.CreatedAt)))
		if p.shared {
			fmt.Fprintf(tw, "%s\t", present.WatchShort(e.Poll))
		}
		msg := present.Question(t) // a waiting task's question says more than its status message
		if msg == "" {
			msg = termtext.Line(t.StatusMessage)
		}
		fmt.Fprintf(tw, "%s\n", termtext.OneLine(msg, 50))
	}
	return tw.Flush()
}

// end says so when no page came.
func (p *taskTable) end() error {
	if p.started {
		return nil
	}
	_, err := fmt.Fprintln(p.w, "no tasks")
	return err
}

// printDetail shows everything about one task.
func printDetail(w io.Writer, e deck.Entry, configured []deck.Server, pollErr string) {
	t := e.Task
	line := func(label, value string) {
		if value != "" {
			fmt.Fprintf(w, "%-14s %s\n", label+":", value)
		}
	}
	line("id", t.ID)
	line("server", present.ServerDetail(t.Server, configured))
	line("tool", termtext.Line(t.Tool))
	line("arguments", termtext.Line(string(t.Arguments)))
	line("key", termtext.Line(t.IdempotencyKey))
	line("agent", termtext.Line(t.Agent))
	line("launched by", launchedBy(t))
	line("status", present.StatusText(t))
	line("message", termtext.Line(t.StatusMessage))
	line("created", t.CreatedAt.Local().Format(time.DateTime))
	line("updated", t.UpdatedAt.Local().Format(time.DateTime))
	line("last change", present.Act(t.Act))
	line("poll error", termtext.Line(pollErr))
	line("watched by", present.Watch(e.Poll))
	line("answer by", present.AnswerBy(t, e.Poll.AnswerBy, time.Now()))
	if warn := present.TTLBeforeDeadline(t, e.Poll.AnswerBy); warn != "" {
		line("warning", warn)
	}
	if t.Status == model.StatusInputRequired {
		fmt.Fprintln(w, "waiting for input:")
		printInputs(w, t, "  ")
	}
	if len(t.Answers) > 0 {
		fmt.Fprintln(w, "answered:")
		for _, a := range t.Answers {
			fmt.Fprintf(w, "  %s\n", present.Answer(a, time.DateTime))
		}
	}
	if len(t.Result) > 0 {
		fmt.Fprintf(w, "result:\n  %s\n", indent(present.Result(t), "  "))
	}
	if t.Error != nil {
		line("error", fmt.Sprintf("%d %s", t.Error.Code, termtext.Line(t.Error.Message)))
	}
	line("local error", termtext.Line(t.LocalError))
	fmt.Fprintln(w, "history:")
	for _, h := range present.History(t, time.DateTime) {
		fmt.Fprintf(w, "  %s\n", h)
	}
}

func indent(s, pad string) string { return strings.ReplaceAll(s, "\n", "\n"+pad) }

// configured lists the servers to name tasks by (present.ServerName): an
// ad-hoc URL that is a configured server's shows as its name, as on the
// dashboard. Without the list (a refused config edit) tasks show as
// recorded.
func configured(ctx context.Context, dk deck.Deck) []deck.Server {
	servers, err := dk.Servers(ctx)
	if err != nil {
		return nil
	}
	return servers
}

// errorLine is an error as taskdeck prints it: inert, on one line.
func errorLine(err error) string { return termtext.OneLine(termtext.Line(err.Error()), 0) }
