package model

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"time"
	"unicode/utf8"
)

// MaxStatusMessage bounds the status message kept from a server, in
// bytes: a longer one is cut at a character boundary and ends in "…". A
// status message is a line for a table row; a server that sends megabytes
// must not cost megabytes per record and per history entry.
const MaxStatusMessage = 4 << 10

// ClipStatusMessage applies MaxStatusMessage.
func ClipStatusMessage(s string) string { return clip(s, MaxStatusMessage) }

// clip cuts s longer than most bytes at a character boundary within them,
// and ends it in "…".
func clip(s string, most int) string {
	if len(s) <= most {
		return s
	}
	cut := most
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// Snapshot is what the server said about a task (a CreateTaskResult or a
// tasks/get result), already decoded and checked by the client.
type Snapshot struct {
	TaskID   string
	Protocol string // "2025-11-25", or empty for 2026-07-28
	// InputsUnheard: the report cannot list the task's questions (on
	// 2025-11-25 they come as requests on another stream, not with the
	// status): the record keeps the ones it holds.
	InputsUnheard  bool
	Status         Status
	StatusMessage  string
	CreatedAt      time.Time
	TTLMs          *int64
	PollIntervalMs *int64
	InputRequests  map[string]InputRequest
	Result         json.RawMessage
	IsError        bool
	Error          *RPCError
	// LastUpdatedAt is the server's lastUpdatedAt (zero if it sent none);
	// ReceivedAt when the client read the report. Together they order
	// reports (see Task.Stale).
	LastUpdatedAt time.Time
	ReceivedAt    time.Time
}

// Stale tells whether a report is older than the one the record holds,
// by the server's lastUpdatedAt, then (equal, or missing on a side) by
// the order the reports arrived in: a pushed state read before a poll's
// answer but applied after it must not take the record back (issue 20,
// item 12). An end is never stale: no state follows it, so a server whose
// clock went back still ends its tasks.
func (t *Task) Stale(s Snapshot) bool {
	if s.Status.Terminal() {
		return false
	}
	if !s.LastUpdatedAt.IsZero() && !t.ServerUpdatedAt.IsZero() && !s.LastUpdatedAt.Equal(t.ServerUpdatedAt) {
		return s.LastUpdatedAt.Before(t.ServerUpdatedAt)
	}
	return !s.ReceivedAt.IsZero() && s.ReceivedAt.Before(t.ReportReceivedAt)
}

// Apply folds a server snapshot into the record. It reports whether
// anything worth writing changed; a poll that changed nothing must not
// cost a write. LastPolledAt is set either way but does not count. The
// status message is clipped to MaxStatusMessage. A stale report (Stale)
// changes nothing.
func (t *Task) Apply(s Snapshot, now time.Time) (changed bool, err error) {
	t.LastPolledAt = now
	if t.Stale(s) {
		return false, nil
	}
	s.StatusMessage = ClipStatusMessage(s.StatusMessage)
	if !CanMove(t.Status, s.Status) {
		return false, &TransitionError{From: t.Status, To: s.Status}
	}
	if t.TaskID != "" && s.TaskID != t.TaskID {
		return false, ErrOtherTask
	}
	if t.TaskID == "" && s.TaskID != "" {
		t.TaskID = s.TaskID
		changed = true
	}
	if t.Status != s.Status {
		if err := t.MoveTo(s.Status, s.StatusMessage, now); err != nil {
			return changed, err
		}
		changed = true
	}
	if t.StatusMessage != s.StatusMessage {
		t.StatusMessage = s.StatusMessage
		changed = true
	}
	if s.Protocol != "" && t.Protocol != s.Protocol {
		t.Protocol = s.Protocol
		changed = true
	}
	if !s.CreatedAt.IsZero() && !t.ServerCreatedAt.Equal(s.CreatedAt) {
		t.ServerCreatedAt = s.CreatedAt
		changed = true
	}
	if !sameInt(t.TTLMs, s.TTLMs) {
		t.TTLMs = s.TTLMs
		changed = true
	}
	if !sameInt(t.PollIntervalMs, s.PollIntervalMs) {
		t.PollIntervalMs = s.PollIntervalMs
		changed = true
	}
	// Input requests belong to input_required; elsewhere they are stale.
	inputs := s.InputRequests
	switch {
	case s.Status != StatusInputRequired:
		inputs = nil
	case s.InputsUnheard && len(inputs) == 0:
		inputs = t.InputRequests
	}
	if !sameInputs(t.InputRequests, inputs) {
		t.InputRequests = inputs
		changed = true
	}
	if len(s.Result) > 0 && !bytes.Equal(t.Result, s.Result) {
		t.Result = s.Result
		t.IsError = s.IsError
		changed = true
	}
	if s.Error != nil && (t.Error == nil || !sameRPCError(t.Error, s.Error)) {
		t.Error = s.Error
		changed = true
	}
	// Which report the record holds: not a change by itself (a server
	// may move lastUpdatedAt on every poll), written with the next one.
	if s.LastUpdatedAt.After(t.ServerUpdatedAt) {
		t.ServerUpdatedAt = s.LastUpdatedAt
	}
	if s.ReceivedAt.After(t.ReportReceivedAt) {
		t.ReportReceivedAt = s.ReceivedAt
	}
	if changed {
		t.UpdatedAt = now
	}
	return changed, nil
}

// OrphanResolved is the reason an orphaned intent takes its call's answer.
const OrphanResolved = "the call's answer came after the intent was orphaned (its engine seemed gone); the orphan is resolved by it"

// ApplyCallAnswer is Apply for the answer of a call to its own intent (a
// handle, or a result without a task). An intent orphaned meanwhile by
// another engine, with no handle yet, takes it too: the orphan is
// resolved by it (orphaned → the answer's status, with OrphanResolved),
// so that the server's task is recorded and watched, never dropped.
func (t *Task) ApplyCallAnswer(s Snapshot, now time.Time) (changed bool, err error) {
	if t.Status != StatusOrphaned || t.TaskID != "" {
		return t.Apply(s, now)
	}
	return t.resolveOrphan(s, OrphanResolved, now)
}

// OrphanAdopted is the reason an orphaned intent takes a task the
// server listed (tasks/list) as its own.
const OrphanAdopted = "adopted: the server lists a task created within this call's window and no other record or orphan matches it; the orphan is resolved by it"

// Adopt resolves an orphaned intent with no handle by a task the server
// listed, with OrphanAdopted (orphaned → the task's status).
func (t *Task) Adopt(s Snapshot, now time.Time) (changed bool, err error) {
	if t.Status != StatusOrphaned || t.TaskID != "" {
		return false, &TransitionError{From: t.Status, To: s.Status}
	}
	return t.resolveOrphan(s, OrphanAdopted, now)
}

func (t *Task) resolveOrphan(s Snapshot, why string, now time.Time) (changed bool, err error) {
	if !CanMove(StatusCalling, s.Status) {
		return false, &TransitionError{From: t.Status, To: s.Status}
	}
	t.History = append(t.History, Transition{At: now, From: StatusOrphaned, To: s.Status, Message: why})
	t.Status = s.Status
	t.UpdatedAt = now
	_, err = t.Apply(s, now) // the rest of the answer: its status is there
	return true, err
}

// MarkUnknown ends a task the server no longer knows.
func (t *Task) MarkUnknown(why string, now time.Time) error {
	return t.MoveTo(StatusUnknown, why, now)
}

// MarkAnswered records input keys as answered, once each, and what was
// answered (their pending answers) in the audit trail.
func (t *Task) MarkAnswered(keys []string, now time.Time) {
	t.MarkAnsweredBy(keys, now, AnsweredInput{})
}

// MarkAnsweredBy is MarkAnswered naming who answered (by's By and Engine).
func (t *Task) MarkAnsweredBy(keys []string, now time.Time, by AnsweredInput) {
	for _, k := range keys {
		if !t.Answered(k) {
			t.AnsweredKeys = append(t.AnsweredKeys, k)
			t.Answers = append(t.Answers, AnsweredInput{Key: k, At: now, Response: slices.Clone(t.PendingAnswers[k]), By: by.By, Engine: by.Engine})
		}
	}
	t.UpdatedAt = now
}

func sameInt(a, b *int64) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func sameRPCError(a, b *RPCError) bool {
	return a.Code == b.Code && a.Message == b.Message && bytes.Equal(a.Data, b.Data)
}

func sameInputs(a, b map[string]InputRequest) bool {
	return maps.EqualFunc(a, b, func(x, y InputRequest) bool {
		return x.Method == y.Method && bytes.Equal(x.Params, y.Params)
	})
}

// ErrOtherTask means that a snapshot names another task than the record's. It is an
// invalid answer, never a new handle. (Task ids stay out of the message:
// servers may treat them as bearer tokens.)
var ErrOtherTask = errors.New("the server answered about another task than the one asked for")

// NewFound records a task a server listed (tasks/list) that no record
// held: status found, the server's task id and what the server said of
// it. The revision's tasks name neither tool nor arguments, so it has
// none. Its idempotency key (FoundKey) makes a second record of the same
// task, by another engine of a fleet reconciling at once, a duplicate
// key the store refuses.
func NewFound(server ServerRef, s Snapshot, now time.Time) *Task {
	t := &Task{
		ID:              NewID(now),
		Server:          server,
		IdempotencyKey:  FoundKey(server, s.TaskID),
		TaskID:          s.TaskID,
		Protocol:        s.Protocol,
		Status:          StatusFound,
		TTLMs:           s.TTLMs,
		PollIntervalMs:  s.PollIntervalMs,
		ServerCreatedAt: s.CreatedAt,
		CreatedAt:       now,
		UpdatedAt:       now,
	}
	t.Refound(s, now)
	return t
}

// FoundKey is the idempotency key of a found task's record.
func FoundKey(server ServerRef, taskID string) string {
	return "found:" + server.String() + ":" + taskID
}

// Refound puts what the server says of a found task, listed again, on
// its record; it reports whether that changed.
func (t *Task) Refound(s Snapshot, now time.Time) bool {
	msg := "the server lists this task " + string(s.Status)
	if s.StatusMessage != "" {
		msg += ": " + s.StatusMessage
	}
	msg = ClipStatusMessage(msg + " — no record held it; adopt it to watch it, or leave it")
	if t.Status != StatusFound || t.StatusMessage == msg {
		return false
	}
	t.StatusMessage, t.UpdatedAt = msg, now
	return true
}

// Reasons in the history of a found task the operator decided on.
const (
	FoundAdopted = "adopted: taskdeck watches this task the server listed; its status comes from the next poll"
	FoundLeft    = "left to the server: taskdeck does not watch it and does not offer it again"
)

// AdoptFound makes a found task watched (found → working; the next poll
// brings its status and, once it ends, its result).
func (t *Task) AdoptFound(now time.Time) error {
	if t.Status != StatusFound {
		return &TransitionError{From: t.Status, To: StatusWorking}
	}
	t.StatusMessage = ""
	return t.MoveTo(StatusWorking, FoundAdopted, now)
}

// LeaveFound leaves a found task to its server (found → left).
func (t *Task) LeaveFound(now time.Time) error {
	if t.Status != StatusFound {
		return &TransitionError{From: t.Status, To: StatusLeft}
	}
	t.StatusMessage = FoundLeft
	return t.MoveTo(StatusLeft, FoundLeft, now)
}
