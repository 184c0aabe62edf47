package model

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// wantLegal is DESIGN.md's state machine, written out independently of
// the table in status.go so that a change there is caught here.
var wantLegal = map[Status][]Status{
	StatusCalling:       {StatusWorking, StatusInputRequired, StatusCompleted, StatusFailed, StatusCancelled, StatusOrphaned},
	StatusWorking:       {StatusInputRequired, StatusCompleted, StatusFailed, StatusCancelled, StatusUnknown},
	StatusInputRequired: {StatusWorking, StatusCompleted, StatusFailed, StatusCancelled, StatusUnknown, StatusCalling},
	StatusOrphaned:      nil,
	StatusFound:         {StatusWorking, StatusLeft},
	StatusCompleted:     nil,
	StatusFailed:        nil,
	StatusCancelled:     nil,
	StatusUnknown:       nil,
	StatusLeft:          nil,
}

func isWantLegal(from, to Status) bool {
	for _, s := range wantLegal[from] {
		if s == to {
			return true
		}
	}
	return false
}

func TestAllStatusesCovered(t *testing.T) {
	if len(AllStatuses) != len(wantLegal) {
		t.Fatalf("AllStatuses has %d entries, the test's state machine %d", len(AllStatuses), len(wantLegal))
	}
	for _, s := range AllStatuses {
		if _, ok := wantLegal[s]; !ok {
			t.Errorf("status %q is not in the test's state machine", s)
		}
	}
}

func TestTransitions(t *testing.T) {
	t0 := time.Date(2026, 8, 1, 12, 0, 0, 0, time.UTC)
	for _, from := range AllStatuses {
		for _, to := range AllStatuses {
			t.Run(fmt.Sprintf("%s->%s", from, to), func(t *testing.T) {
				legal := from == to || isWantLegal(from, to)
				if got := CanMove(from, to); got != legal {
					t.Fatalf("CanMove(%s, %s) = %v, want %v", from, to, got, legal)
				}
				task := &Task{Status: from, UpdatedAt: t0, History: []Transition{{At: t0, To: from}}}
				now := t0.Add(time.Minute)
				err := task.MoveTo(to, "why", now)
				switch {
				case from == to:
					if err != nil {
						t.Fatalf("MoveTo(same) = %v, want nil", err)
					}
					if len(task.History) != 1 || !task.UpdatedAt.Equal(t0) {
						t.Fatalf("MoveTo(same) recorded something: history %v, updatedAt %v", task.History, task.UpdatedAt)
					}
				case legal:
					if err != nil {
						t.Fatalf("MoveTo = %v, want nil", err)
					}
					if task.Status != to {
						t.Fatalf("status = %s, want %s", task.Status, to)
					}
					if len(task.History) != 2 {
						t.Fatalf("history has %d entries, want 2", len(task.History))
					}
					want := Transition{At: now, From: from, To: to, Message: "why"}
					if got := task.History[1]; got != want {
						t.Fatalf("history entry = %+v, want %+v", got, want)
					}
					if !task.UpdatedAt.Equal(now) {
						t.Fatalf("updatedAt = %v, want %v", task.UpdatedAt, now)
					}
				default:
					var te *TransitionError
					if !errors.As(err, &te) {
						t.Fatalf("MoveTo = %v (%T), want *TransitionError", err, err)
					}
					if te.From != from || te.To != to {
						t.Fatalf("TransitionError = %+v, want %s → %s", te, from, to)
					}
					if task.Status != from || len(task.History) != 1 || !task.UpdatedAt.Equal(t0) {
						t.Fatalf("refused move changed the record: %+v", task)
					}
					if msg := err.Error(); msg == "" || containsNewline(msg) {
						t.Fatalf("error text %q is not one line", msg)
					}
				}
			})
		}
	}
}

func TestTerminalAndPollable(t *testing.T) {
	terminal := map[Status]bool{StatusCompleted: true, StatusFailed: true, StatusCancelled: true, StatusUnknown: true, StatusLeft: true}
	pollable := map[Status]bool{StatusWorking: true, StatusInputRequired: true}
	for _, s := range AllStatuses {
		if s.Terminal() != terminal[s] {
			t.Errorf("%s.Terminal() = %v", s, s.Terminal())
		}
		if s.Pollable() != pollable[s] {
			t.Errorf("%s.Pollable() = %v", s, s.Pollable())
		}
		if terminal[s] && len(wantLegal[s]) != 0 {
			t.Errorf("terminal %s has exits in the test table", s)
		}
	}
}

func TestHistoryOverALife(t *testing.T) {
	t0 := time.Date(2026, 8, 1, 12, 0, 0, 0, time.UTC)
	task := NewIntent(ServerRef{Name: "build"}, "compile", nil, "", t0)
	steps := []Status{StatusWorking, StatusInputRequired, StatusWorking, StatusCompleted}
	for i, s := range steps {
		if err := task.MoveTo(s, "", t0.Add(time.Duration(i+1)*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	if len(task.History) != 1+len(steps) {
		t.Fatalf("history = %+v", task.History)
	}
	prev := StatusCalling
	for i, h := range task.History[1:] {
		if h.From != prev || h.To != steps[i] || !h.At.Equal(t0.Add(time.Duration(i+1)*time.Second)) {
			t.Errorf("history[%d] = %+v", i+1, h)
		}
		prev = h.To
	}
	if err := task.MoveTo(StatusWorking, "", t0.Add(time.Hour)); err == nil {
		t.Fatal("completed → working was allowed")
	}
}

func TestParseStatus(t *testing.T) {
	for _, s := range AllStatuses {
		got, err := ParseStatus(string(s))
		if err != nil || got != s {
			t.Errorf("ParseStatus(%q) = %q, %v", s, got, err)
		}
	}
	if _, err := ParseStatus("Working"); err == nil {
		t.Error("ParseStatus accepted a wrong case")
	}
}

func TestServerStatus(t *testing.T) {
	for _, s := range []string{"working", "input_required", "completed", "failed", "cancelled"} {
		if got, ok := ServerStatus(s); !ok || string(got) != s {
			t.Errorf("ServerStatus(%q) = %q, %v", s, got, ok)
		}
	}
	// Local statuses and inventions are not the server's to claim.
	for _, s := range []string{"calling", "orphaned", "unknown", "", "done", "WORKING"} {
		if _, ok := ServerStatus(s); ok {
			t.Errorf("ServerStatus(%q) accepted", s)
		}
	}
}

func containsNewline(s string) bool {
	for _, r := range s {
		if r == '\n' || r == '\r' {
			return true
		}
	}
	return false
}
