package model

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestHistoryBounded: a server that flips its task working ↔
// input_required with a 4 KB message, 10,000 times, leaves a history of at
// most MaxHistory entries and a record under 64 KB. The first and last
// transitions stay as they were, every operator act stays, and the folded
// entries count every transition they replace.
func TestHistoryBounded(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	now := t0
	tick := func() time.Time { now = now.Add(time.Second); return now }
	rec := NewIntent(ServerRef{Name: "s"}, "sleep", json.RawMessage(`{"n":1}`), "", t0)
	full := slices.Clone(rec.History) // what an unbounded history would hold
	move := func(to Status, msg string) {
		t.Helper()
		if err := rec.MoveTo(to, msg, tick()); err != nil {
			t.Fatal(err)
		}
		full = append(full, rec.History[len(rec.History)-1])
	}
	// Three rounds of input before the task exists: operator acts.
	for range 3 {
		move(StatusInputRequired, "the server needs input before it starts the task")
		move(StatusCalling, "answers sent with the call")
	}
	big := strings.Repeat("x", 4<<10)
	const flips = 10000
	for i := range flips {
		st := StatusWorking
		if i%2 == 1 {
			st = StatusInputRequired
		}
		if _, err := rec.Apply(Snapshot{TaskID: "srv-1", Status: st, StatusMessage: fmt.Sprint(i, " ", big)}, tick()); err != nil {
			t.Fatal(err)
		}
		full = append(full, rec.History[len(rec.History)-1])
		if len(rec.History) > MaxHistory {
			t.Fatalf("after %d flips the history holds %d entries, more than %d", i+1, len(rec.History), MaxHistory)
		}
	}
	move(StatusCompleted, "done")

	h := rec.History
	same := func(a, b Transition) bool {
		return a.At.Equal(b.At) && a.From == b.From && a.To == b.To && a.Folded == 0
	}
	if !slices.EqualFunc(h[:historyHead], full[:historyHead], same) {
		t.Fatalf("the first transitions changed:\n%+v\nwant\n%+v", h[:historyHead], full[:historyHead])
	}
	if !slices.EqualFunc(h[len(h)-historyTail:], full[len(full)-historyTail:], same) {
		t.Fatal("the last transitions are not kept as they were")
	}
	// Messages: the first and last transitions' and the operator acts'
	// kept, the others' within historyMessageBytes, the newest first.
	if h[0].Message != full[0].Message || h[len(h)-1].Message != "done" {
		t.Fatalf("the first or last message is gone: %q, %q", h[0].Message, h[len(h)-1].Message)
	}
	middle, dropped := 0, false
	for i := len(h) - 2; i > 0; i-- {
		tr := h[i]
		switch {
		case tr.operatorAct():
			if tr.Message != "answers sent with the call" {
				t.Fatalf("an operator act lost its message: %+v", tr)
			}
		case tr.Message == "" && tr.Folded == 0:
			dropped = true
		case tr.Message != "" && dropped:
			t.Fatalf("entry %d keeps its message while a newer one lost its", i)
		default:
			middle += len(tr.Message)
		}
	}
	if middle > historyMessageBytes || middle == 0 {
		t.Fatalf("the middle transitions keep %d bytes of messages, want 1..%d", middle, historyMessageBytes)
	}
	count, acts, folds := 0, 0, 0
	for _, tr := range h {
		count += max(tr.Folded, 1)
		if tr.operatorAct() {
			acts++
		}
		if tr.Folded > 0 {
			folds++
		}
		if len(tr.Message) > MaxHistoryMessage+len("…") {
			t.Fatalf("a history entry keeps a %d-byte message", len(tr.Message))
		}
	}
	if count != len(full) || acts != 3 || folds == 0 {
		t.Fatalf("the history stands for %d transitions with %d operator acts (%d folded entries); want %d and 3", count, acts, folds, len(full))
	}
	if got := rec.InputRounds(); got != 3 {
		t.Fatalf("InputRounds = %d after folding, want 3", got)
	}
	b, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 16<<10 {
		t.Fatalf("the record is %d bytes, more than 16 KiB", len(b))
	}
	t.Logf("%d transitions: %d history entries (%d folded), record %d bytes", len(full), len(h), folds, len(b))
}

// TestHistoryBoundKeepsOperatorActsInTheMiddle: operator acts past the
// first transitions are not folded, whatever comes after them.
func TestHistoryBoundKeepsOperatorActsInTheMiddle(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	rec := NewIntent(ServerRef{Name: "s"}, "sleep", nil, "", t0)
	at := t0
	for range 10 { // the engine's most rounds of input before a task
		for _, st := range []Status{StatusInputRequired, StatusCalling} {
			at = at.Add(time.Second)
			if err := rec.MoveTo(st, "", at); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := range 500 {
		st := StatusWorking
		if i%2 == 1 {
			st = StatusInputRequired
		}
		at = at.Add(time.Second)
		if err := rec.MoveTo(st, "", at); err != nil {
			t.Fatal(err)
		}
	}
	acts := 0
	for _, tr := range rec.History {
		if tr.operatorAct() {
			acts++
		}
	}
	if acts != 10 || len(rec.History) > MaxHistory {
		t.Fatalf("%d operator acts kept of 10, %d entries (at most %d)", acts, len(rec.History), MaxHistory)
	}
}

// TestShortHistoryKeepsItsMessages: a task with a few transitions and
// ordinary messages keeps every one of them.
func TestShortHistoryKeepsItsMessages(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	rec := NewIntent(ServerRef{Name: "s"}, "deploy", nil, "", at)
	var want []string
	for i, st := range []Status{StatusWorking, StatusInputRequired, StatusWorking, StatusInputRequired, StatusWorking, StatusCompleted} {
		at = at.Add(time.Second)
		msg := fmt.Sprintf("step %d: %s", i, strings.Repeat("·", 100))
		if err := rec.MoveTo(st, msg, at); err != nil {
			t.Fatal(err)
		}
		want = append(want, msg)
	}
	var got []string
	for _, tr := range rec.History[len(rec.History)-len(want):] {
		got = append(got, tr.Message)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("messages kept: %q\nwant %q", got, want)
	}
}
