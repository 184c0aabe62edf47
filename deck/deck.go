// Package deck is the one interface every frontend of taskdeck uses: the
// dashboard, the commands, the proxy and Go programs. The engine
// implements it in process; the service implements it over the owner's
// unix socket. A frontend sees this package and model, nothing below:
// no store, no connection pool, no MCP SDK type.
//
// A frontend never polls. The engine does, and frontends Watch its feed.
package deck

import (
	"context"
	"encoding/json"
	"time"

	"github.com/taskdeck/taskdeck/model"
)

// Deck is taskdeck as its frontends see it.
type Deck interface {
	// Auditor: every Deck reads and keeps the audit log.
	Auditor
	// Call makes a tool call durable: the idempotency key is checked (a
	// key that names the same call returns its record: nothing is sent);
	// a call the server's tool list rules out (an unknown tool, arguments
	// its input schema refuses) is refused with a KindUsage error before
	// anything is written or sent (a list that cannot be had leaves the
	// check to the server); the intent is committed, tools/call is sent,
	// and the handle (or the result) is committed before Call returns or
	// any change about it is published. A call the server answers with input requests before any
	// task exists returns a record that NeedsInput (status input_required,
	// no task id, the request state kept in the record): answer it with
	// Continue, now or after a restart.
	Call(ctx context.Context, req CallRequest) (CallResult, error)
	// Continue answers the input requests of a record that NeedsInput and
	// sends the next round of its call. Answers accumulate until every key
	// the round asks for has one; only then does tools/call go out again.
	Continue(ctx context.Context, id string, answers map[string]json.RawMessage) (CallResult, error)
	// Answer sends answers to a task's input requests (tasks/update). On a
	// record that NeedsInput it is Continue.
	Answer(ctx context.Context, id string, answers map[string]json.RawMessage) (*model.Task, error)
	// Cancel asks the server to stop a task and polls it once at once.
	Cancel(ctx context.Context, id string) (*model.Task, error)
	// CancelMany asks the servers to stop several tasks, a bounded number
	// at a time per server, and has each polled soon after (the outcomes
	// come on the feed). It returns one error per id, in the order given:
	// nil where the server acknowledged the cancel.
	CancelMany(ctx context.Context, ids []string) []error
	// Reconcile lists the tasks of the 2025-11-25 servers in use
	// (tasks/list) and compares them with the records: an orphan one
	// listed task matches is resolved by it, and every other listed task
	// no record holds is recorded as found. Servers that cannot list are
	// skipped. PollNow with no ids does it too, aside.
	Reconcile(ctx context.Context) (Reconciled, error)
	// SettleFound decides on a found task (one a 2025-11-25 server lists
	// that no record held): adopted, it is watched (polled at once, its
	// history saying who adopted it); left, it stays with its server and
	// is never offered again. Any other record is a KindState error.
	SettleFound(ctx context.Context, id string, adopt bool) (*model.Task, error)
	// Forget deletes a record without telling its server.
	Forget(ctx context.Context, id string) error
	// Prune deletes finished records not changed for olderThan (0: all).
	Prune(ctx context.Context, olderThan time.Duration) (int, error)
	// PollNow polls the given open tasks at once and returns when each is
	// polled (the outcome is in Get and the feed). None given: it starts
	// the engine's watch and makes every open task due.
	PollNow(ctx context.Context, ids []string) error

	// Get returns one record and its poll state, by id or unique prefix.
	Get(ctx context.Context, id string) (Entry, error)
	// List returns the records the filter admits, newest first.
	List(ctx context.Context, f Filter) ([]Entry, error)
	// Servers lists the configured servers.
	Servers(ctx context.Context) ([]Server, error)
	// Tools lists a server's tools (refresh: list again now).
	Tools(ctx context.Context, server model.ServerRef, refresh bool) (*ToolList, error)

	// Watch streams the feed from a revision: first a Snapshot (every
	// record, when from is 0 or older than what can be replayed) or the
	// changes committed after from, then every change as it commits.
	// The feed ends when ctx ends, or with Feed.Err when the deck goes.
	Watch(ctx context.Context, from uint64) (Feed, error)
	// WatchWindow is Watch for a watcher that holds only some records:
	// its snapshot holds every open record, the newest w.Finished
	// finished ones and the store's counts per status (Event.Counts),
	// read from the store's indexes however many records it keeps, in
	// parts of a few hundred records (EventSnapshot with the counts and
	// the newest open records, then EventSnapshotMore, read as the
	// watcher takes them, until one has More false); the changes that
	// follow are every change, each with the status it had (Event.Prev). It reads older records with List (Filter.Before), a
	// page at a time. A resume (from > 0) replays the changes after from
	// and the counts as of the end of the replay, with EventCaughtUp.
	WatchWindow(ctx context.Context, from uint64, w Window) (Feed, error)

	// Close releases the deck (for the owner: the engine, the store).
	Close() error
}

// CallRequest is one tools/call to make durable.
type CallRequest struct {
	Server model.ServerRef `json:"server"`
	Tool   string          `json:"tool"`
	Args   json.RawMessage `json:"args,omitempty"` // a JSON object; empty means {}
	Key    string          `json:"key,omitempty"`  // idempotency key; empty means none
	// Answers given up front, for input requests before the task exists:
	// the first round that asks only for these is answered at once.
	Answers map[string]json.RawMessage `json:"answers,omitempty"`
	// Agent names who made the call (an agent's clientInfo name behind
	// the proxy); empty for taskdeck's own frontends.
	Agent string `json:"agent,omitempty"`
	// Repeats is the id of the record this call runs again (a re-run of
	// a failed, cancelled, unknown or orphaned task); empty for a new call.
	Repeats string `json:"repeats,omitempty"`
	// Owner and HandleHash go on the record as they are (see model.Task):
	// the proxy's principal and the hash of the agent's task id secret.
	Owner      string `json:"owner,omitempty"`
	HandleHash string `json:"handleHash,omitempty"`
}

// Reconciled is what a Reconcile did: the orphans resolved by a listed
// task and the found records made, by id.
type Reconciled struct {
	Adopted []string `json:"adopted,omitempty"`
	Found   []string `json:"found,omitempty"`
}

// CallResult is the outcome of Call or Continue.
type CallResult struct {
	Task *model.Task `json:"task"`
	// Reused: the key named an existing record of the same call, and
	// nothing was sent.
	Reused bool `json:"reused,omitempty"`
	// NeedsInput: the server asks for input before it starts the task;
	// Task.InputRequests holds the requests, Task.PendingInputs the keys
	// still to answer. Answer them with Continue.
	NeedsInput bool `json:"needsInput,omitempty"`
	// Again are keys the server asks for again after they were answered:
	// it did not take those answers.
	Again []string `json:"again,omitempty"`
}

// Entry is a record and its poll state.
type Entry struct {
	Task *model.Task `json:"task"`
	Poll PollState   `json:"poll,omitzero"`
}

// PollState is the engine's poll state of one open task. It lives in the
// engine, in memory: a poll that changes nothing writes nothing.
type PollState struct {
	LastPolled time.Time `json:"lastPolled,omitzero"`
	Next       time.Time `json:"next,omitzero"`
	Errors     int       `json:"errors,omitempty"` // failed polls in a row
	LastError  string    `json:"lastError,omitempty"`
	// Pushed: the server pushes this task's changes (its polls are a
	// slow safety net); false: it is polled.
	Pushed bool `json:"pushed,omitempty"`
	// Watcher names the engine that polls this open task on a shared
	// store (host/pid/random, from its claim in the database); empty with
	// Badger (this process polls every task) or while none holds it.
	Watcher string `json:"watcher,omitempty"`
	// NoEngine: on a shared store, no live engine can poll this open task
	// (its server is in none's config, or it is an ad-hoc URL no live
	// engine called): nobody watches it until one that can starts.
	NoEngine bool `json:"noEngine,omitempty"`
	// AnswerBy is the deadline of the wait for input the task is in, as
	// the engine reads it under its config: the one set on the wait, else
	// its server's or tool's "deadline" from the wait's start; nil when
	// it waits for no answer or has none.
	AnswerBy *model.WaitDeadline `json:"answerBy,omitempty"`
}

// Filter selects records for List. Zero fields admit everything.
type Filter struct {
	Statuses []model.Status `json:"statuses,omitempty"`
	// Groups names groups (see Groups); a record passes when its status
	// is one of Statuses or a group admits it.
	Groups []string `json:"groups,omitempty"`
	Server string   `json:"server,omitempty"` // a configured name or an ad-hoc URL
	Tool   string   `json:"tool,omitempty"`
	// Key admits only the record of this idempotency key (exact).
	Key string `json:"key,omitempty"`
	// Text is matched, case-insensitively, in the arguments, the status
	// message and the result.
	Text  string `json:"text,omitempty"`
	Limit int    `json:"limit,omitempty"` // 0: no limit
	// Before admits only records older than the record of this id (ids
	// sort by creation): the next page after the last record of one.
	// With a Limit the store reads a page at a time, from its indexes.
	Before string `json:"before,omitempty"`
}

// Window is what a WatchWindow snapshot holds besides the open records.
type Window struct {
	// Finished is how many of the newest finished records it holds.
	Finished int `json:"finished"`
}

// Server is one configured server.
type Server struct {
	Name string `json:"name"`
	// Target is its redacted URL, or the command of a stdio server.
	Target string `json:"target"`
	Stdio  bool   `json:"stdio,omitempty"`
	// Push is the state of the server's push stream: "" (none asked for
	// yet), PushUp, PushDown or PushNotOffered.
	Push string `json:"push,omitempty"`
	// PushError is why the stream is down or not offered.
	PushError string `json:"pushError,omitempty"`
	// Retention is the store's schedule for finished tasks, the same for
	// every server's; nil when the config sets none.
	Retention *Retention `json:"retention,omitempty"`
}

// Retention is the config's "retention" as the engine that answers runs
// it: finished tasks not changed for Finished are pruned.
type Retention struct {
	Finished string `json:"finished"` // a Go duration, e.g. "720h0m0s"
	// Runner is who prunes: "this engine", another engine of a fleet by
	// its name, or "" when nothing that runs now does (only `taskdeck
	// serve` and the dashboard run the schedule).
	Runner string `json:"runner,omitempty"`
	// LastRun is this engine's last prune (zero: none yet), LastPruned
	// how many records it deleted, LastError why it failed.
	LastRun    time.Time `json:"lastRun,omitzero"`
	LastPruned int       `json:"lastPruned"`
	LastError  string    `json:"lastError,omitempty"`
}

// A server's push states (Server.Push).
const (
	PushUp         = "up"
	PushDown       = "down, re-subscribing"
	PushNotOffered = "not offered"
)

// ToolList is a server's tools as the engine listed them.
type ToolList struct {
	Server string `json:"server"`
	// SupportsTasks: the server advertises the tasks extension.
	SupportsTasks bool   `json:"supportsTasks"`
	Tools         []Tool `json:"tools"` // sorted by name
}

// Tool is one tool of a server. Every text in it is the server's:
// sanitize before showing it.
type Tool struct {
	Name        string          `json:"name"`
	Title       string          `json:"title,omitempty"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"inputSchema,omitempty"`
	Arguments   []Argument      `json:"arguments,omitempty"`
	// Raw is the tool exactly as the server sent it.
	Raw json.RawMessage `json:"raw"`
}

// Argument is one argument of a tool, read from its input schema.
type Argument struct {
	Name        string   `json:"name"` // a.b for a property of an object argument
	Type        string   `json:"type"` // "string", "integer or null", "list of string", "any"
	Required    bool     `json:"required,omitempty"`
	Default     string   `json:"default,omitempty"` // JSON
	Enum        []string `json:"enum,omitempty"`    // JSON of each allowed value
	Range       string   `json:"range,omitempty"`   // "1 to 20", "at least 0"
	Format      string   `json:"format,omitempty"`
	Header      string   `json:"header,omitempty"` // the Mcp-Param-* header it also travels in
	Description string   `json:"description,omitempty"`
	// Summary is its constraints in one phrase: "integer, optional, default 3, 1 to 20".
	Summary string `json:"summary"`
}
