// Package model is taskdeck's domain: the task record, its statuses and
// their legal transitions, and the poll policy. It does no IO.
package model

import "fmt"

// Status is where a task stands, as the server reported it or as taskdeck
// knows it locally.
type Status string

// Statuses reported by the server (Tasks extension).
const (
	StatusWorking       Status = "working"
	StatusInputRequired Status = "input_required"
	StatusCompleted     Status = "completed"
	StatusFailed        Status = "failed"
	StatusCancelled     Status = "cancelled"
)

// Statuses only taskdeck knows.
const (
	// StatusCalling means the intent is on disk, no handle has come back yet.
	StatusCalling Status = "calling"
	// StatusOrphaned is a call whose handle was never received; the work may
	// be running on the server, and only the operator can decide.
	StatusOrphaned Status = "orphaned"
	// StatusUnknown means the server no longer knows the task (-32602).
	StatusUnknown Status = "unknown"
	// StatusFound is a task a 2025-11-25 server lists (tasks/list) that no
	// record held: its call's handle was lost, or another client of the
	// same credentials made it. It is not polled; the operator adopts it
	// (it is watched from then on) or leaves it.
	StatusFound Status = "found"
	// StatusLeft is a found task the operator left to its server: never
	// watched, never offered again.
	StatusLeft Status = "left"
)

// AllStatuses lists every status, in the order a display would group them.
// A new status goes at the end: the Badger store keeps its counts per
// status in this order.
var AllStatuses = []Status{
	StatusCalling, StatusWorking, StatusInputRequired, StatusOrphaned,
	StatusCompleted, StatusFailed, StatusCancelled, StatusUnknown,
	StatusFound, StatusLeft,
}

// ParseStatus accepts the exact name of a status.
func ParseStatus(s string) (Status, error) {
	for _, st := range AllStatuses {
		if string(st) == s {
			return st, nil
		}
	}
	return "", fmt.Errorf("unknown status %q (one of: calling, working, input_required, orphaned, found, completed, failed, cancelled, unknown, left)", s)
}

// ServerStatus maps a status string from the wire; anything the protocol
// does not define is rejected, so a lying server cannot invent states.
func ServerStatus(s string) (Status, bool) {
	switch st := Status(s); st {
	case StatusWorking, StatusInputRequired, StatusCompleted, StatusFailed, StatusCancelled:
		return st, true
	}
	return "", false
}

// Terminal statuses never change again.
func (s Status) Terminal() bool {
	switch s {
	case StatusCompleted, StatusFailed, StatusCancelled, StatusUnknown, StatusLeft:
		return true
	}
	return false
}

// Pollable statuses have a server task worth asking about.
func (s Status) Pollable() bool {
	return s == StatusWorking || s == StatusInputRequired
}

// legal lists, for each status, the statuses it may move to.
var legal = map[Status][]Status{
	// A handle (any seed status), a direct result, a definite failure, or
	// a call lost in flight.
	StatusCalling: {StatusWorking, StatusInputRequired, StatusCompleted, StatusFailed, StatusCancelled, StatusOrphaned},
	StatusWorking: {StatusInputRequired, StatusCompleted, StatusFailed, StatusCancelled, StatusUnknown},
	// Back to calling: the answers to input asked before the task existed
	// go out with the next tools/call (no server status maps to calling).
	StatusInputRequired: {StatusWorking, StatusCompleted, StatusFailed, StatusCancelled, StatusUnknown, StatusCalling},
	// Orphaned waits for the operator, who can only forget it.
	StatusOrphaned: {},
	// Found waits for the operator: adopted, it is watched (its status
	// comes from the next poll); left, it is not.
	StatusFound: {StatusWorking, StatusLeft},
}

// CanMove reports whether from → to is a legal transition. Staying put is
// always legal (a poll that changed nothing).
func CanMove(from, to Status) bool {
	if from == to {
		return true
	}
	for _, s := range legal[from] {
		if s == to {
			return true
		}
	}
	return false
}

// TransitionError says a move the state machine forbids was attempted.
type TransitionError struct {
	From, To Status
}

func (e *TransitionError) Error() string {
	return fmt.Sprintf("illegal status change %s → %s", e.From, e.To)
}
