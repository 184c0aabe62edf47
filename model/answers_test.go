package model

import (
	"encoding/json"
	"testing"
	"time"
)

// TestAnswersAreKeptAsAnAuditTrail: every answer given stays in the
// record with its time, a refused one is marked, and a clone is deep.
func TestAnswersAreKeptAsAnAuditTrail(t *testing.T) {
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	task := NewIntent(ServerRef{Name: "demo"}, "approve", nil, "", now)
	task.PendingAnswers = map[string]json.RawMessage{"ok": json.RawMessage(`{"action":"accept","content":{"ok":true}}`)}
	task.MarkAnswered([]string{"ok"}, now.Add(time.Minute))
	task.MarkAnswered([]string{"ok"}, now.Add(2*time.Minute)) // the same key again: once
	task.DropAnswers([]string{"ok"})
	task.PendingAnswers = map[string]json.RawMessage{"ok": json.RawMessage(`{"action":"decline"}`)}
	task.MarkAnswered([]string{"ok"}, now.Add(3*time.Minute))

	if len(task.Answers) != 2 {
		t.Fatalf("answers = %+v, want the refused one and the new one", task.Answers)
	}
	first, second := task.Answers[0], task.Answers[1]
	if !first.Refused || !first.At.Equal(now.Add(time.Minute)) || string(first.Response) != `{"action":"accept","content":{"ok":true}}` {
		t.Fatalf("first answer = %+v", first)
	}
	if second.Refused || string(second.Response) != `{"action":"decline"}` {
		t.Fatalf("second answer = %+v", second)
	}
	c := task.Clone()
	c.Answers[0].Response[2] = 'X'
	if task.Answers[0].Response[2] == 'X' {
		t.Fatal("Clone shares the answers' bytes")
	}
}
