package model

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"sync"
	"time"
)

// ServerRef is what a record keeps to reach its server again after a
// restart: the configured name, or the URL of an ad-hoc server. Secrets
// (headers, env) stay in the config and are never stored.
type ServerRef struct {
	Name string `json:"name,omitempty"`
	URL  string `json:"url,omitempty"`
}

// String names the server for display.
func (r ServerRef) String() string {
	if r.Name != "" {
		return r.Name
	}
	return r.URL
}

// InputRequest is one entry of a task's inputRequests map, kept as the
// server sent it so that nothing is lost for request kinds we do not render.
type InputRequest struct {
	Method string          `json:"method"`
	Params json.RawMessage `json:"params,omitempty"`
}

// RPCError is a JSON-RPC error object, as carried by a failed task.
type RPCError struct {
	Code    int64           `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *RPCError) Error() string { return fmt.Sprintf("%s (code %d)", e.Message, e.Code) }

// Transition is one entry of a record's history.
type Transition struct {
	At      time.Time `json:"at"`
	From    Status    `json:"from,omitempty"`
	To      Status    `json:"to"`
	Message string    `json:"message,omitempty"`
	// Folded > 0: this entry stands for that many transitions, folded to
	// bound the history (boundHistory): From is the first one's, To and At
	// the last one's, and their messages are gone.
	Folded int `json:"folded,omitempty"`
	// By made the move: the engine on a poll's news, the principal
	// who answered, called or cancelled.
	By Actor `json:"by,omitzero"`
}

// History bounds. A server may flip a task between working and
// input_required for as long as it runs, each flip a legal transition:
// kept whole, one task's history took megabytes and every write rewrote
// them (issue 20). So a history keeps its first historyHead and last
// historyTail entries as they were, and every operator act; the others
// between fold into entries that count them. The operator acts a history
// holds (answers sent with a call) are bounded by the engine's rounds of
// input (10), which keeps a history within MaxHistory entries.
const (
	MaxHistory  = 64
	historyHead = 8
	historyTail = 32
	// MaxHistoryMessage bounds a history entry's message in bytes: the
	// record's current StatusMessage keeps up to MaxStatusMessage, and 64
	// entries of 512 bytes keep a record's history under 40 KB.
	MaxHistoryMessage = 512
	// historyMessageBytes bounds the bytes of the messages a history keeps
	// besides those of its first and last transitions and of operator
	// acts: the newest keep theirs, and from the first that does not fit
	// on, older ones lose theirs. A flipping server's 4 KB messages kept
	// in 40 entries made a 31 KB record, which Badger's table builders
	// copy through doubling buffers on every write (issue 20: owner RSS).
	historyMessageBytes = 2 << 10
)

// operatorAct tells a transition the operator made: answers sent with the
// next tools/call. (Cancels and answers to a task are in CancelRequested
// and Answers, not in the history.)
func (tr Transition) operatorAct() bool {
	return tr.From == StatusInputRequired && tr.To == StatusCalling
}

// Task is taskdeck's durable record of one tools/call.
type Task struct {
	ID        string          `json:"id"`
	Server    ServerRef       `json:"server"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// IdempotencyKey is the operator's key; ArgsHash tells a repeat of the
	// same call from a different call under the same key.
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
	ArgsHash       string `json:"argsHash"`
	// Agent names who made the call (an agent behind the proxy); empty
	// for taskdeck's own frontends.
	Agent string `json:"agent,omitempty"`
	// Owner is the principal whose task this is when an agent made it
	// through the proxy (named by its credential): other agents cannot
	// see it. Empty for the local user's own calls.
	Owner string `json:"owner,omitempty"`
	// HandleHash is the sha256 (hex) of the secret part of the task id
	// the agent was given, or ("n:" and a nonce) what the proxy makes the
	// secret from under a key the store does not hold: the proxy finds the
	// record by its id and takes the id only with the secret. The secret
	// itself is not kept.
	HandleHash string `json:"handleHash,omitempty"`
	// Engine names the engine that made the intent on a shared database
	// (empty on Badger, the sole owner's): another engine orphans the
	// intent at once when its maker is no longer alive there.
	Engine string `json:"engine,omitempty"`
	// Repeats is the id of the record this one runs again (a re-run).
	Repeats string `json:"repeats,omitempty"`

	TaskID string `json:"taskId,omitempty"`
	// Protocol is the MCP revision the task's server spoke when it made
	// the task: "2025-11-25"; empty for 2026-07-28 (the default).
	Protocol       string `json:"protocol,omitempty"`
	Status         Status `json:"status"`
	StatusMessage  string `json:"statusMessage,omitempty"`
	TTLMs          *int64 `json:"ttlMs,omitempty"`
	PollIntervalMs *int64 `json:"pollIntervalMs,omitempty"`
	// ServerCreatedAt is the server's createdAt, the origin of ttlMs.
	ServerCreatedAt time.Time `json:"serverCreatedAt,omitzero"`
	// ServerUpdatedAt is the lastUpdatedAt of the server's report the
	// record holds, ReportReceivedAt when it was read: an older report
	// is not applied over it (Stale).
	ServerUpdatedAt  time.Time `json:"serverUpdatedAt,omitzero"`
	ReportReceivedAt time.Time `json:"reportReceivedAt,omitzero"`

	CreatedAt    time.Time `json:"createdAt"`
	UpdatedAt    time.Time `json:"updatedAt"`
	LastPolledAt time.Time `json:"lastPolledAt,omitzero"`

	InputRequests map[string]InputRequest `json:"inputRequests,omitempty"`
	// AnsweredKeys are input request keys already answered: never asked again.
	AnsweredKeys []string `json:"answeredKeys,omitempty"`
	// PendingAnswers were given by the operator but not yet acknowledged by
	// the server; they are re-sent until they are (re-sending is harmless).
	PendingAnswers map[string]json.RawMessage `json:"pendingAnswers,omitempty"`
	// RequestState is the server's requestState of a call that asked for
	// input before any task existed (NeedsInput): it goes back with the
	// answers on the next tools/call.
	RequestState string `json:"requestState,omitempty"`

	Result json.RawMessage `json:"result,omitempty"`
	// IsError marks a completed result whose tool reported an error.
	IsError bool      `json:"isError,omitempty"`
	Error   *RPCError `json:"error,omitempty"`
	// LocalError says what went wrong on our side (call refused, transport).
	LocalError string `json:"localError,omitempty"`

	CancelRequested bool         `json:"cancelRequested,omitempty"`
	History         []Transition `json:"history,omitempty"`
	// Answers is what the operator answered to its input requests, and
	// when: an audit trail kept after the requests are gone.
	Answers []AnsweredInput `json:"answers,omitempty"`
	// Act is the record's last change and who made it (model.Attribute).
	Act *Act `json:"act,omitempty"`
	// WaitDeadline is a deadline of a wait for input set by an operator,
	// or escalated by the engine (deadline.go); nil: none written.
	WaitDeadline *WaitDeadline `json:"waitDeadline,omitempty"`

	// Revision is the store-wide revision of the record's last committed
	// change; the store sets it on every write, callers never do. It stays
	// the last field: the store appends it to JSON marshalled without it.
	Revision uint64 `json:"revision,omitempty"`
}

// AnsweredInput is one answer given to an input request.
type AnsweredInput struct {
	Key      string          `json:"key"`
	At       time.Time       `json:"at"`
	Response json.RawMessage `json:"response,omitempty"`
	// Refused: the server did not take it, and asked again.
	Refused bool `json:"refused,omitempty"`
	// By is who answered, when the request named them; Engine is the
	// engine of a fleet that took the answer and sent it.
	By     Actor  `json:"by,omitzero"`
	Engine string `json:"engine,omitempty"`
}

// Who names who gave the answer, for a message ("" when unknown).
func (a AnsweredInput) Who() string {
	who := a.By.Name
	if a.By.Host != "" {
		who = strings.TrimSpace(who + " on " + a.By.Host)
	}
	if a.Engine != "" {
		who = strings.TrimSpace(who + " through engine " + a.Engine)
	}
	return who
}

// LastAnswer is the latest answer given to key, if any.
func (t *Task) LastAnswer(key string) (AnsweredInput, bool) {
	for _, a := range slices.Backward(t.Answers) {
		if a.Key == key {
			return a, true
		}
	}
	return AnsweredInput{}, false
}

// Rerunnable tells a task that may be launched again with the same tool
// and arguments: it ended without its result (failed, cancelled,
// unknown), or nobody knows whether its server ever started it
// (orphaned).
func (t *Task) Rerunnable() bool {
	switch t.Status {
	case StatusFailed, StatusCancelled, StatusUnknown, StatusOrphaned:
		return true
	}
	return false
}

// NewIntent builds the record written before tools/call is sent.
func NewIntent(server ServerRef, tool string, args json.RawMessage, key string, now time.Time) *Task {
	t := &Task{
		ID:             NewID(now),
		Server:         server,
		Tool:           tool,
		Arguments:      args,
		IdempotencyKey: key,
		ArgsHash:       ArgsHash(server, tool, args),
		Status:         StatusCalling,
		CreatedAt:      now,
		UpdatedAt:      now,
	}
	t.History = []Transition{{At: now, To: StatusCalling}}
	return t
}

// IDLen is the length of every id NewID makes.
const IDLen = 16

// ValidID tells a string that has the shape of a whole id.
func ValidID(s string) bool {
	if len(s) != IDLen {
		return false
	}
	_, err := idEncoding.DecodeString(s)
	return err == nil
}

var idEncoding = base32.NewEncoding("0123456789abcdefghjkmnpqrstvwxyz").WithPadding(base32.NoPadding)

// NewID makes a local id that sorts by creation time: 6 bytes of
// milliseconds and 4 bytes of sequence, in lower-case Crockford base32.
// The sequence starts at a random value in each new millisecond and counts
// up within it, so ids made in one process never repeat and sort in call
// order even when many share a millisecond (4 random bytes alone collide
// once in ~100 runs of 10k ids in one millisecond).
func NewID(now time.Time) string {
	ms := uint64(now.UnixMilli())
	idMu.Lock()
	if ms == idLastMS {
		idSeq++
	} else {
		var r [4]byte
		if _, err := rand.Read(r[:]); err != nil {
			panic(err) // crypto/rand never fails on supported platforms
		}
		// The top bit stays clear: 2^31 ids per millisecond before a wrap.
		idLastMS, idSeq = ms, binary.BigEndian.Uint32(r[:])>>1
	}
	seq := idSeq
	idMu.Unlock()

	var b [10]byte
	var msb [8]byte
	binary.BigEndian.PutUint64(msb[:], ms)
	copy(b[:6], msb[2:])
	binary.BigEndian.PutUint32(b[6:], seq)
	return idEncoding.EncodeToString(b[:])
}

var (
	idMu     sync.Mutex
	idLastMS uint64
	idSeq    uint32
)

// ArgsHash fingerprints a call, so that a key reused for a different call
// is caught. Arguments are canonicalised (object keys sorted) first.
func ArgsHash(server ServerRef, tool string, args json.RawMessage) string {
	canon := canonicalJSON(args)
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00", server.Name, server.URL, tool)
	h.Write(canon)
	return hex.EncodeToString(h.Sum(nil)[:16])
}

func canonicalJSON(raw json.RawMessage) []byte {
	if len(raw) == 0 {
		return []byte("{}")
	}
	// Numbers stay json.Number: through float64, integers beyond 2^53
	// would collapse and two different calls would look the same.
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return raw
	}
	if _, err := dec.Token(); err != io.EOF {
		return raw // trailing data: not one JSON value
	}
	out, err := json.Marshal(v) // encoding/json sorts map keys
	if err != nil {
		return raw
	}
	return out
}

// Clone returns a deep copy, so that callers may change it freely.
func (t *Task) Clone() *Task {
	c := *t
	c.Arguments = slices.Clone(t.Arguments)
	c.Result = slices.Clone(t.Result)
	if t.InputRequests != nil {
		c.InputRequests = make(map[string]InputRequest, len(t.InputRequests))
		for k, r := range t.InputRequests {
			r.Params = slices.Clone(r.Params)
			c.InputRequests[k] = r
		}
	}
	c.AnsweredKeys = slices.Clone(t.AnsweredKeys)
	if t.PendingAnswers != nil {
		c.PendingAnswers = make(map[string]json.RawMessage, len(t.PendingAnswers))
		for k, v := range t.PendingAnswers {
			c.PendingAnswers[k] = slices.Clone(v)
		}
	}
	c.History = slices.Clone(t.History)
	c.Answers = slices.Clone(t.Answers)
	c.Act = t.Act.clone()
	if t.WaitDeadline != nil {
		d := *t.WaitDeadline
		c.WaitDeadline = &d
	}
	for i := range c.Answers {
		c.Answers[i].Response = slices.Clone(t.Answers[i].Response)
	}
	if t.Error != nil {
		e := *t.Error
		e.Data = slices.Clone(t.Error.Data)
		c.Error = &e
	}
	if t.TTLMs != nil {
		v := *t.TTLMs
		c.TTLMs = &v
	}
	if t.PollIntervalMs != nil {
		v := *t.PollIntervalMs
		c.PollIntervalMs = &v
	}
	return &c
}

// MoveTo changes the status, recording the transition. It refuses moves
// the state machine forbids; moving to the current status does nothing.
func (t *Task) MoveTo(to Status, msg string, now time.Time) error {
	if t.Status == to {
		return nil
	}
	if !CanMove(t.Status, to) {
		return &TransitionError{From: t.Status, To: to}
	}
	t.History = boundHistory(append(t.History, Transition{At: now, From: t.Status, To: to, Message: clip(msg, MaxHistoryMessage)}))
	thinMessages(t.History)
	t.Status = to
	t.UpdatedAt = now
	return nil
}

// boundHistory folds a history longer than MaxHistory: between its first
// historyHead and last historyTail entries, each run of entries that are
// not operator acts becomes one entry counting them. Folding happens once
// every ~25 transitions, not on each.
func boundHistory(h []Transition) []Transition {
	if len(h) <= MaxHistory {
		return h
	}
	out := slices.Clone(h[:historyHead])
	for _, tr := range h[historyHead : len(h)-historyTail] {
		if tr.operatorAct() {
			out = append(out, tr)
			continue
		}
		n := max(tr.Folded, 1)
		if last := &out[len(out)-1]; len(out) > historyHead && last.Folded > 0 {
			last.Folded += n
			last.At, last.To = tr.At, tr.To
			continue
		}
		out = append(out, Transition{At: tr.At, From: tr.From, To: tr.To, Folded: n})
	}
	return append(out, h[len(h)-historyTail:]...)
}

// thinMessages drops the messages of h's middle transitions past
// historyMessageBytes, newest kept first (see historyMessageBytes).
func thinMessages(h []Transition) {
	budget := historyMessageBytes
	for i := len(h) - 2; i > 0; i-- {
		tr := &h[i]
		if tr.Message == "" || tr.operatorAct() {
			continue
		}
		if len(tr.Message) > budget {
			budget = 0
			tr.Message = ""
			continue
		}
		budget -= len(tr.Message)
	}
}

// Deadline is createdAt + ttlMs on the server's clock, or zero when the
// task has no known lifetime.
func (t *Task) Deadline() time.Time {
	if t.TTLMs == nil || *t.TTLMs <= 0 || t.ServerCreatedAt.IsZero() {
		return time.Time{}
	}
	return t.ServerCreatedAt.Add(Millis(*t.TTLMs))
}

// ServerPollInterval is the server's latest hint, or 0.
func (t *Task) ServerPollInterval() time.Duration {
	if t.PollIntervalMs == nil || *t.PollIntervalMs <= 0 {
		return 0
	}
	return Millis(*t.PollIntervalMs)
}

// Millis converts a server's milliseconds to a duration, saturating
// instead of wrapping around: 1e13 ms would otherwise be a negative delay.
func Millis(ms int64) time.Duration {
	const most = math.MaxInt64 / int64(time.Millisecond)
	switch {
	case ms > most:
		return math.MaxInt64
	case ms < -most:
		return math.MinInt64
	}
	return time.Duration(ms) * time.Millisecond
}

// Answered reports whether an input request key was already answered.
func (t *Task) Answered(key string) bool {
	return slices.Contains(t.AnsweredKeys, key)
}

// WaitsForInput reports whether the task waits for an answer the operator
// can give: input_required with a request not answered yet. (A task
// input_required whose requests are all answered, or not fetched yet,
// waits for its server, not for the operator.)
func (t *Task) WaitsForInput() bool {
	return t.Status == StatusInputRequired && len(t.PendingInputs()) > 0
}

// WaitingSince is when the task last began to wait for input: the
// inbox's clock, apart from the task's run time.
func (t *Task) WaitingSince() time.Time { return t.lastEntered(StatusInputRequired) }

// StatusSince is when the task moved to the status it has now.
func (t *Task) StatusSince() time.Time { return t.lastEntered(t.Status) }

// lastEntered is when the task last moved to s, by its history; the last
// update when the history does not say (folded, or a record from before
// histories).
func (t *Task) lastEntered(s Status) time.Time {
	for i := len(t.History) - 1; i >= 0; i-- {
		if t.History[i].To == s {
			return t.History[i].At
		}
	}
	return t.UpdatedAt
}

// DropAnswers forgets answers the server refused: they are no longer
// pending, and their keys may be answered again.
func (t *Task) DropAnswers(keys []string) {
	for _, k := range keys {
		delete(t.PendingAnswers, k)
	}
	if len(t.PendingAnswers) == 0 {
		t.PendingAnswers = nil
	}
	for i := len(t.Answers) - 1; i >= 0; i-- {
		if a := &t.Answers[i]; slices.Contains(keys, a.Key) && !a.Refused && !slices.ContainsFunc(t.Answers[i+1:], func(b AnsweredInput) bool { return b.Key == a.Key }) {
			a.Refused = true // the latest answer of each key refused
		}
	}
	t.AnsweredKeys = slices.DeleteFunc(t.AnsweredKeys, func(k string) bool { return slices.Contains(keys, k) })
	if len(t.AnsweredKeys) == 0 {
		t.AnsweredKeys = nil
	}
}

// NeedsInput reports a call the server asked for input before it started
// any task: there is nothing to poll, and the answers go out with the next
// tools/call of the same call.
func (t *Task) NeedsInput() bool {
	return t.Status == StatusInputRequired && t.TaskID == ""
}

// Pollable reports a record with a server task worth asking about.
func (t *Task) Pollable() bool { return t.Handle().Pollable() }

// Handle is what watching a record takes of it: which task of which
// server it names, and its status. The JSON names are the record's, so a
// record's JSON decodes into it (the rest skipped, never allocated).
type Handle struct {
	ID     string    `json:"id"`
	Server ServerRef `json:"server"`
	TaskID string    `json:"taskId,omitempty"`
	Status Status    `json:"status"`
}

// Handle returns the record's handle.
func (t *Task) Handle() Handle {
	return Handle{ID: t.ID, Server: t.Server, TaskID: t.TaskID, Status: t.Status}
}

// Pollable reports a handle with a server task worth asking about.
func (h Handle) Pollable() bool { return h.Status.Pollable() && h.TaskID != "" }

// InputRounds counts the rounds of input a call was asked for before its
// task existed (those answered, and the one it waits on), to bound a
// server that keeps asking.
func (t *Task) InputRounds() int {
	n := 0
	if t.NeedsInput() {
		n++
	}
	for _, tr := range t.History {
		if tr.From == StatusInputRequired && tr.To == StatusCalling {
			n++
		}
	}
	return n
}

// PendingInputs returns the keys of input requests still to be answered,
// sorted, so that every caller asks in the same order.
func (t *Task) PendingInputs() []string {
	var keys []string
	for k := range t.InputRequests {
		if !t.Answered(k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}
