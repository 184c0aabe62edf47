// Package present turns task records into plain, sanitized text. The
// command line and the dashboard both show tasks through it, so a result
// or an input request reads the same in both.
package present

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/termtext"
)

// Result renders a tool result's content: text parts as they are (JSON
// text indented), other parts by type, all of it sanitized.
func Result(t *model.Task) string {
	if len(t.Result) == 0 {
		return ""
	}
	var res struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		StructuredContent json.RawMessage `json:"structuredContent"`
	}
	if err := json.Unmarshal(t.Result, &res); err != nil {
		return termtext.Sanitize(string(t.Result), true)
	}
	var parts []string
	if t.IsError {
		parts = append(parts, "tool error:")
	}
	for _, c := range res.Content {
		if c.Type == "text" {
			parts = append(parts, PrettyJSON(c.Text))
		} else {
			parts = append(parts, "["+c.Type+" content]")
		}
	}
	if len(res.Content) == 0 && len(res.StructuredContent) > 0 {
		parts = append(parts, PrettyJSON(string(res.StructuredContent)))
	}
	return termtext.Sanitize(strings.Join(parts, "\n"), true)
}

// PrettyJSON indents s when it is a JSON object or array, else returns it.
func PrettyJSON(s string) string {
	trimmed := strings.TrimSpace(s)
	if !strings.HasPrefix(trimmed, "{") && !strings.HasPrefix(trimmed, "[") {
		return s
	}
	var buf bytes.Buffer
	if json.Indent(&buf, []byte(trimmed), "", "  ") != nil {
		return s
	}
	return buf.String()
}

// Input describes one pending input request: its message, its fields,
// and the command line that answers it.
type Input struct {
	Key     string
	Message string
	URL     string   // url mode
	Fields  []string // "name (type, required)"
	Example string   // an answer of the right shape, as JSON
	Err     string   // the request could not be read
}

// Inputs lists a task's pending input requests, in key order.
func Inputs(t *model.Task) []Input {
	var out []Input
	for _, key := range t.PendingInputs() {
		req := t.InputRequests[key]
		in := Input{Key: termtext.Line(key)}
		e, err := req.Elicitation()
		if err != nil {
			in.Message = termtext.Line(req.Method)
			in.Err = termtext.Line(err.Error())
			out = append(out, in)
			continue
		}
		in.Message = termtext.Line(e.Message)
		if e.Mode == "url" {
			in.URL = termtext.Line(e.URL)
			in.Example = `{"action":"accept"}`
			out = append(out, in)
			continue
		}
		example := map[string]any{}
		for _, f := range e.Schema.Properties {
			req := ""
			if e.Schema.IsRequired(f.Name) {
				req = ", required"
			}
			in.Fields = append(in.Fields, fmt.Sprintf("%s (%s%s)", termtext.Line(f.Name), f.Type, req))
			example[f.Name] = exampleValue(f)
		}
		ex, _ := json.Marshal(map[string]any{"action": "accept", "content": example})
		in.Example = termtext.Line(string(ex))
		out = append(out, in)
	}
	return out
}

// Question is what a waiting task asks: the message of its first
// pending input request ("" when it waits for no answer).
func Question(t *model.Task) string {
	if !t.WaitsForInput() {
		return ""
	}
	if in := Inputs(t); len(in) > 0 {
		return in[0].Message
	}
	return ""
}

// maxAnswer bounds an answer's value on one line: the record keeps it whole.
const maxAnswer = 200

// Answer words one answer given: "approve-1 = {…}  at 15:04:05 by alice"
// (layout formats the time), with the engine that sent it on a fleet
// and whether the server refused it.
func Answer(a model.AnsweredInput, layout string) string {
	s := termtext.Line(a.Key) + " = " + termtext.OneLine(termtext.Line(string(a.Response)), maxAnswer) +
		"  at " + a.At.Local().Format(layout)
	if by := Actor(a.By); by != "" {
		s += " by " + by
	}
	if a.Engine != "" {
		s += " through engine " + termtext.OneLine(termtext.Line(a.Engine), 80)
	}
	if a.Refused {
		s += "  (refused by the server)"
	}
	return s
}

func exampleValue(p model.Property) any {
	if len(p.Default) > 0 {
		var v any
		if json.Unmarshal(p.Default, &v) == nil {
			return v
		}
	}
	switch p.Type {
	case "boolean":
		return true
	case "number", "integer":
		if p.Minimum != nil {
			return *p.Minimum
		}
		return 0
	case "array":
		return []string{p.Enum[0]}
	}
	if len(p.Enum) > 0 {
		return p.Enum[0]
	}
	return "…"
}

// Age is a short human duration: 42s, 1m14s, 25m, 3h, 2d.
func Age(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < 10*time.Minute: // seconds still matter: 1m14s
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// StatusText is the status with the qualifiers an operator needs.
func StatusText(t *model.Task) string {
	s := string(t.Status)
	switch {
	case t.Status == model.StatusCompleted && t.IsError:
		s += " (tool error)"
	case t.CancelRequested && !t.Status.Terminal():
		s += " (cancel requested)"
	}
	return s
}

// History is a record's transitions, one line each, oldest first:
// "15:04:05  working → completed  message" (layout formats the time).
func History(t *model.Task, layout string) []string {
	type line struct {
		at   time.Time
		text string
	}
	lines := make([]line, 0, len(t.History)+len(t.Answers))
	for _, h := range t.History {
		from := string(h.From)
		if from == "" {
			from = "·"
		}
		msg := termtext.Line(h.Message)
		if h.Folded > 0 {
			msg = fmt.Sprintf("(%s folded, the last at this time)", Count(h.Folded, "change"))
		}
		text := fmt.Sprintf("%s  %s → %s", h.At.Local().Format(layout), from, h.To)
		if by := Actor(h.By); by != "" {
			text += "  by " + by
		}
		lines = append(lines, line{h.At, strings.TrimRight(text+"  "+msg, " ")})
	}
	for _, a := range t.Answers {
		text := fmt.Sprintf("%s  answered %s", a.At.Local().Format(layout), termtext.Line(a.Key))
		if by := Actor(a.By); by != "" {
			text += "  by " + by
		}
		if a.Refused {
			text += "  (refused by the server)"
		}
		lines = append(lines, line{a.At, text})
	}
	// Answers among the moves, in time order (a stable sort keeps a move
	// and an answer of the same instant in that order).
	slices.SortStableFunc(lines, func(a, b line) int { return a.at.Compare(b.at) })
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = l.text
	}
	return out
}

// Actor names who acted: "alice", "agent ci-bot (claude)", "engine",
// with "@host" on a fleet; "" for no one named. Every part is another
// party's word: made inert.
func Actor(a model.Actor) string {
	if a.IsZero() {
		return ""
	}
	s := termtext.OneLine(termtext.Line(a.Name), 60)
	if a.Role != model.RoleUser && a.Role != model.RoleEngine {
		s = termtext.OneLine(termtext.Line(a.Role), 20) + " " + s
	}
	if a.Label != "" {
		s += " (" + termtext.OneLine(termtext.Line(a.Label), 40) + ")"
	}
	if a.Host != "" {
		s += "@" + termtext.OneLine(termtext.Line(a.Host), 60)
	}
	return s
}

// Act words a record's last change: "answer by alice"; "" for none.
func Act(a *model.Act) string {
	if a == nil {
		return ""
	}
	s := termtext.Line(a.Kind)
	if len(a.Keys) > 0 {
		s += " " + termtext.OneLine(termtext.Line(strings.Join(a.Keys, ", ")), 80)
	}
	if by := Actor(a.Actor); by != "" {
		s += " by " + by
	}
	return s
}

// Count is n of what, in the plural unless n is 1: "1 task", "3 tasks".
func Count(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// Reconciled is the start-up reconcile's report in one line.
func Reconciled(r deck.Reconcile) string {
	return fmt.Sprintf("reconciled: %d re-attached · %d finished meanwhile · %d unknown · %d orphaned · %d unreachable",
		r.Reattached, r.Finished, r.Unknown, r.Orphaned, r.Unreachable)
}

// Watch words which engine watches a task on a shared store: "no engine
// can reach its server", or the watcher as "host, pid N"; "" with one
// store per host, or for a task nothing watches (it ended). The name is
// another host's word: made inert.
func Watch(p deck.PollState) string {
	if p.NoEngine {
		return "no engine can reach its server"
	}
	host, pid, ok := splitEngine(p.Watcher)
	if !ok {
		return termtext.OneLine(termtext.Line(p.Watcher), 80)
	}
	return fmt.Sprintf("%s, pid %s", host, pid)
}

// WatchShort is Watch for a column: the watcher's host, or "none" when
// no engine can reach the task's server.
func WatchShort(p deck.PollState) string {
	if p.NoEngine {
		return "none"
	}
	host, _, _ := splitEngine(p.Watcher)
	return host
}

// splitEngine reads an engine's name, host/pid/random, with the host
// made inert and cut to fit a column.
func splitEngine(name string) (host, pid string, ok bool) {
	parts := strings.Split(name, "/")
	host = termtext.OneLine(termtext.Line(parts[0]), 24)
	if len(parts) != 3 {
		return host, "", false
	}
	return host, termtext.OneLine(termtext.Line(parts[1]), 12), true
}

// Retention words the store's retention schedule, for `taskdeck servers`
// and the dashboard's servers view; when says the last run's time ("at
// 15:04:05", "3m ago").
func Retention(r deck.Retention, when func(time.Time) string) string {
	s := "retention: finished tasks older than " + termtext.Line(r.Finished) + " are pruned"
	switch r.Runner {
	case "":
		return s + " by `taskdeck serve` or the dashboard, neither of which runs now"
	case "this engine":
		s += " every hour by this owner"
	default:
		return s + " by the fleet's engine " + Watch(deck.PollState{Watcher: r.Runner})
	}
	switch {
	case r.LastError != "":
		s += "; the last run failed: " + termtext.OneLine(termtext.Line(r.LastError), 120)
	case !r.LastRun.IsZero():
		s += fmt.Sprintf("; the last run, %s, pruned %d", when(r.LastRun), r.LastPruned)
	}
	return s
}
