// Package notify tells people of task events (issue 27): the engine's
// store commits each event to its outbox with the change that made it
// (Events), and a Deliverer in the store's owner sends it to every
// endpoint that wants it, a signed Standard Webhook or a command hook, at
// least once and with one id.
package notify

import (
	"crypto/rand"
	"encoding/json"
	"maps"
	"slices"
	"time"

	mcpconfig "github.com/taskdeck/taskdeck/mcpclient/config"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store"
)

// Payload is what every endpoint receives: the Standard Webhooks shape
// {"type", "timestamp", "data"}.
type Payload struct {
	Type      string    `json:"type"` // "task." + the event's kind
	Timestamp time.Time `json:"timestamp"`
	Data      Data      `json:"data"`
}

// Data is what happened to which task (or server), and what a person can
// do.
type Data struct {
	Event     string      `json:"event"`
	Task      *TaskInfo   `json:"task,omitempty"`
	Server    *ServerInfo `json:"server,omitempty"` // an event of a server (server.go)
	Questions []Question  `json:"questions,omitempty"`
	// Answer is the command that answers a question (KEY and the
	// response JSON filled in by the person); Show prints the task.
	Answer string `json:"answer,omitempty"`
	// Settle, on a found event, is the commands that adopt the task
	// (watch it) or leave it to its server.
	Settle string `json:"settle,omitempty"`
	Show   string `json:"show"`
	// Deadline is the wait's deadline, on a deadline event.
	Deadline *Deadline `json:"deadline,omitempty"`
}

// Deadline is a wait's deadline as a deadline event tells it: when it
// was, who set it ("" for the config), and what the engine did besides
// telling ("" for nothing).
type Deadline struct {
	At      time.Time `json:"at"`
	SetBy   string    `json:"setBy,omitempty"`
	Outcome string    `json:"outcome,omitempty"`
}

// TaskInfo is the part of the record an endpoint needs.
type TaskInfo struct {
	ID            string       `json:"id"`
	Server        string       `json:"server"`
	Tool          string       `json:"tool"`
	Status        model.Status `json:"status"`
	StatusMessage string       `json:"statusMessage,omitempty"`
	Agent         string       `json:"agent,omitempty"`
	Error         string       `json:"error,omitempty"`
	CreatedAt     time.Time    `json:"createdAt"`
}

// Question is one input request the task waits on, as the server sent it.
type Question struct {
	Key    string          `json:"key"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params,omitempty"`
}

// Kind is the event the change of prev (nil: new) into next is, or "".
// A task that asks again while it waits (a new question key) is a new
// input_required event; the engine's escalation of a wait at its
// deadline is the deadline event.
func Kind(prev, next *model.Task) string {
	if next.Escalates(prev) {
		return mcpconfig.EventDeadline
	}
	switch next.Status {
	case model.StatusInputRequired:
		if prev == nil || prev.Status != next.Status {
			return mcpconfig.EventInputRequired
		}
		for k := range next.InputRequests {
			if _, ok := prev.InputRequests[k]; !ok {
				return mcpconfig.EventInputRequired
			}
		}
		return ""
	case model.StatusCompleted, model.StatusFailed, model.StatusCancelled, model.StatusUnknown, model.StatusOrphaned, model.StatusFound:
		if prev != nil && prev.Status == next.Status {
			return ""
		}
		return string(next.Status)
	}
	return ""
}

// Events is the store's EventFunc for n: nil when no endpoint is
// configured, so that a store without one writes nothing more.
func Events(n mcpconfig.Notify) store.EventFunc {
	if n.Empty() {
		return nil
	}
	ts := targets(n)
	return func(prev, next *model.Task) *store.Event {
		kind := Kind(prev, next)
		if kind == "" {
			return nil
		}
		server := next.Server.String()
		eps := endpoints(ts, func(f mcpconfig.Filter) bool { return f.Wants(kind, server, next.Tool) })
		if len(eps) == 0 {
			return nil
		}
		body, err := Pack(NewPayload(kind, next, time.Now()))
		if err != nil {
			return nil // a record that marshals always does
		}
		return &store.Event{ID: "msg_" + rand.Text(), Body: body, Endpoints: eps}
	}
}

// target is a configured endpoint's name (a hash, made once rather than
// on every write) and filter.
type target struct {
	name   string
	filter mcpconfig.Filter
}

// targets are n's webhooks, then its command hooks.
func targets(n mcpconfig.Notify) []target {
	var ts []target
	for _, w := range n.Webhooks {
		ts = append(ts, target{w.Endpoint(), w.Filter})
	}
	for _, c := range n.Commands {
		ts = append(ts, target{c.Endpoint(), c.Filter})
	}
	return ts
}

// endpoints names the targets whose filter wants an event, each once: a
// URL or argv listed twice is one endpoint (one outbox entry, which
// PostgreSQL's key on event and endpoint would otherwise refuse with the
// task's write).
func endpoints(ts []target, wants func(mcpconfig.Filter) bool) []string {
	var eps []string
	for _, t := range ts {
		if wants(t.filter) && !slices.Contains(eps, t.name) {
			eps = append(eps, t.name)
		}
	}
	return eps
}

// NewPayload is the payload of the event kind of task t, made at now.
func NewPayload(kind string, t *model.Task, now time.Time) Payload {
	dv := derive(kind, t.ID)
	p := Payload{Type: dv.typ, Timestamp: now.UTC().Truncate(time.Millisecond), Data: Data{
		Event: kind,
		Task: &TaskInfo{ID: t.ID, Server: t.Server.String(), Tool: t.Tool, Status: t.Status,
			StatusMessage: t.StatusMessage, Agent: t.Agent, Error: errorText(t), CreatedAt: t.CreatedAt.UTC()},
		Show: dv.show, Answer: dv.answer, Settle: dv.settle,
	}}
	if d := t.WaitDeadline; kind == mcpconfig.EventDeadline && d != nil {
		p.Data.Deadline = &Deadline{At: d.At.UTC(), SetBy: d.By.Name, Outcome: d.Outcome}
	}
	if kind == mcpconfig.EventInputRequired || kind == mcpconfig.EventDeadline {
		for _, k := range slices.Sorted(maps.Keys(t.InputRequests)) {
			r := t.InputRequests[k]
			p.Data.Questions = append(p.Data.Questions, Question{Key: k, Method: r.Method, Params: r.Params})
		}
	}
	return p
}

func errorText(t *model.Task) string {
	switch {
	case t.Error != nil:
		return t.Error.Error()
	case t.LocalError != "":
		return t.LocalError
	}
	return ""
}
