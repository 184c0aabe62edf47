package model

import (
	"encoding/json"
	"testing"
	"time"
)

// A deadline belongs to its wait (issue 27): the one set on a wait holds
// while the task waits; once answered it bounds nothing, and when the
// task asks again the next wait has the configured deadline from its own
// start. An escalation is the deadline event once: the same escalated
// deadline written again is not a second one.
func TestAnswerDeadlineBelongsToItsWait(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	ask := func(tk *Task, key string, at time.Time) {
		t.Helper()
		if err := tk.MoveTo(StatusInputRequired, "", at); err != nil {
			t.Fatal(err)
		}
		tk.InputRequests = map[string]InputRequest{key: {Method: "elicitation/create", Params: json.RawMessage(`{}`)}}
	}
	tk := NewIntent(ServerRef{Name: "s"}, "deploy", nil, "", t0)
	if err := tk.MoveTo(StatusWorking, "", t0); err != nil {
		t.Fatal(err)
	}
	ask(tk, "k1", t0.Add(time.Minute))
	if d := tk.AnswerDeadline(time.Hour); d == nil || !d.At.Equal(t0.Add(61*time.Minute)) {
		t.Fatalf("the configured deadline of the first wait: %+v", d)
	}
	alice := Actor{Name: "alice", Role: RoleOperator}
	tk.WaitDeadline = &WaitDeadline{At: t0.Add(10 * time.Minute), Wait: tk.WaitingSince(), By: alice}
	if d := tk.AnswerDeadline(time.Hour); d == nil || !d.At.Equal(t0.Add(10*time.Minute)) || d.By != alice {
		t.Fatalf("alice's deadline replaces the configured one: %+v", d)
	}

	prev := tk.Clone()
	tk.WaitDeadline.Escalated = t0.Add(10 * time.Minute)
	if !tk.Escalates(prev) {
		t.Fatal("the escalation is not the deadline event")
	}
	again := tk.Clone()
	if again.Escalates(tk) {
		t.Fatal("an escalated deadline written again is a second deadline event")
	}

	tk.MarkAnswered([]string{"k1"}, t0.Add(11*time.Minute))
	if d := tk.AnswerDeadline(time.Hour); d != nil {
		t.Fatalf("a wait answered still has a deadline: %+v", d)
	}
	if err := tk.MoveTo(StatusWorking, "", t0.Add(12*time.Minute)); err != nil {
		t.Fatal(err)
	}
	ask(tk, "k2", t0.Add(20*time.Minute))
	if d := tk.AnswerDeadline(time.Hour); d == nil || !d.At.Equal(t0.Add(80*time.Minute)) || !d.By.IsZero() || !d.Escalated.IsZero() {
		t.Fatalf("the second wait's deadline %+v, want the configured one from its start, not escalated", d)
	}
	if d := tk.AnswerDeadline(0); d != nil {
		t.Fatalf("with none configured the second wait has %+v, want none", d)
	}
}
