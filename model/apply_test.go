package model

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func i64(v int64) *int64 { return &v }

var applyT0 = time.Date(2026, 8, 1, 12, 0, 0, 0, time.UTC)

func workingTask() *Task {
	task := NewIntent(ServerRef{Name: "build"}, "compile", json.RawMessage(`{"target":"all"}`), "k1", applyT0)
	if err := task.MoveTo(StatusWorking, "", applyT0); err != nil {
		panic(err)
	}
	task.TaskID = "786512e2-9e0d-44bd-8f29-789f320fe840"
	task.StatusMessage = "compiling"
	task.TTLMs = i64(60000)
	task.PollIntervalMs = i64(5000)
	task.ServerCreatedAt = applyT0
	return task
}

func workingSnap() Snapshot {
	return Snapshot{
		TaskID:         "786512e2-9e0d-44bd-8f29-789f320fe840",
		Status:         StatusWorking,
		StatusMessage:  "compiling",
		CreatedAt:      applyT0,
		TTLMs:          i64(60000),
		PollIntervalMs: i64(5000),
	}
}

func nameInput() map[string]InputRequest {
	return map[string]InputRequest{
		"name": {Method: "elicitation/create", Params: json.RawMessage(`{"mode":"form","message":"Please enter your name."}`)},
	}
}

func TestApplyNothingChanged(t *testing.T) {
	task := workingTask()
	before := task.Clone()
	later := applyT0.Add(time.Minute)
	changed, err := task.Apply(workingSnap(), later)
	if err != nil {
		t.Fatal(err)
	}
	if changed {
		t.Fatal("a poll that only moved LastPolledAt reported a change")
	}
	if !task.LastPolledAt.Equal(later) {
		t.Fatalf("LastPolledAt = %v, want %v", task.LastPolledAt, later)
	}
	if !task.UpdatedAt.Equal(before.UpdatedAt) {
		t.Fatalf("UpdatedAt moved to %v on a no-op poll", task.UpdatedAt)
	}
	if len(task.History) != len(before.History) {
		t.Fatalf("history grew on a no-op poll: %+v", task.History)
	}

	// A snapshot without createdAt (a server that sent a bad time) keeps ours.
	s := workingSnap()
	s.CreatedAt = time.Time{}
	if changed, _ := task.Apply(s, later.Add(time.Second)); changed {
		t.Fatal("a missing createdAt counted as a change")
	}
	if !task.ServerCreatedAt.Equal(applyT0) {
		t.Fatal("a missing createdAt erased the stored one")
	}
}

func TestApplyEachChange(t *testing.T) {
	cases := []struct {
		name  string
		edit  func(*Snapshot)
		check func(*testing.T, *Task)
	}{
		{"status", func(s *Snapshot) { s.Status = StatusCancelled }, func(t *testing.T, x *Task) {
			if x.Status != StatusCancelled {
				t.Errorf("status = %s", x.Status)
			}
			last := x.History[len(x.History)-1]
			if last.From != StatusWorking || last.To != StatusCancelled {
				t.Errorf("history = %+v", last)
			}
		}},
		{"message", func(s *Snapshot) { s.StatusMessage = "linking" }, func(t *testing.T, x *Task) {
			if x.StatusMessage != "linking" {
				t.Errorf("message = %q", x.StatusMessage)
			}
		}},
		{"message cleared", func(s *Snapshot) { s.StatusMessage = "" }, func(t *testing.T, x *Task) {
			if x.StatusMessage != "" {
				t.Errorf("message = %q", x.StatusMessage)
			}
		}},
		{"protocol", func(s *Snapshot) { s.Protocol = "2025-11-25" }, func(t *testing.T, x *Task) {
			if x.Protocol != "2025-11-25" {
				t.Errorf("protocol = %q", x.Protocol)
			}
		}},
		{"ttl", func(s *Snapshot) { s.TTLMs = i64(120000) }, func(t *testing.T, x *Task) {
			if x.TTLMs == nil || *x.TTLMs != 120000 {
				t.Errorf("ttl = %v", x.TTLMs)
			}
		}},
		{"ttl to null", func(s *Snapshot) { s.TTLMs = nil }, func(t *testing.T, x *Task) {
			if x.TTLMs != nil {
				t.Errorf("ttl = %v", *x.TTLMs)
			}
		}},
		{"interval", func(s *Snapshot) { s.PollIntervalMs = i64(1000) }, func(t *testing.T, x *Task) {
			if x.ServerPollInterval() != time.Second {
				t.Errorf("interval = %v", x.ServerPollInterval())
			}
		}},
		{"interval dropped", func(s *Snapshot) { s.PollIntervalMs = nil }, func(t *testing.T, x *Task) {
			if x.PollIntervalMs != nil {
				t.Errorf("interval = %v", *x.PollIntervalMs)
			}
		}},
		{"createdAt", func(s *Snapshot) { s.CreatedAt = applyT0.Add(time.Second) }, func(t *testing.T, x *Task) {
			if !x.ServerCreatedAt.Equal(applyT0.Add(time.Second)) {
				t.Errorf("createdAt = %v", x.ServerCreatedAt)
			}
		}},
		{"inputs", func(s *Snapshot) { s.Status = StatusInputRequired; s.InputRequests = nameInput() }, func(t *testing.T, x *Task) {
			if len(x.InputRequests) != 1 || x.InputRequests["name"].Method != "elicitation/create" {
				t.Errorf("inputs = %+v", x.InputRequests)
			}
		}},
		{"result", func(s *Snapshot) {
			s.Status = StatusCompleted
			s.Result = json.RawMessage(`{"content":[],"isError":true}`)
			s.IsError = true
		}, func(t *testing.T, x *Task) {
			if string(x.Result) != `{"content":[],"isError":true}` || !x.IsError {
				t.Errorf("result = %s, isError %v", x.Result, x.IsError)
			}
		}},
		{"error", func(s *Snapshot) {
			s.Status = StatusFailed
			s.Error = &RPCError{Code: -32603, Message: "API rate limit exceeded"}
		}, func(t *testing.T, x *Task) {
			if x.Error == nil || x.Error.Code != -32603 {
				t.Errorf("error = %+v", x.Error)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			task := workingTask()
			s := workingSnap()
			c.edit(&s)
			later := applyT0.Add(time.Minute)
			changed, err := task.Apply(s, later)
			if err != nil {
				t.Fatal(err)
			}
			if !changed {
				t.Fatal("change not reported")
			}
			if !task.UpdatedAt.Equal(later) {
				t.Errorf("UpdatedAt = %v, want %v", task.UpdatedAt, later)
			}
			c.check(t, task)
			// The same snapshot again is a no-op.
			if changed, err := task.Apply(s, later.Add(time.Second)); err != nil || changed {
				t.Errorf("second Apply of the same snapshot: changed=%v err=%v", changed, err)
			}
		})
	}
}

func TestApplySameContentOtherPointers(t *testing.T) {
	// Equal values behind fresh pointers and maps are not a change.
	task := workingTask()
	_ = task.MoveTo(StatusInputRequired, "", applyT0)
	task.InputRequests = nameInput()
	s := workingSnap()
	s.Status = StatusInputRequired
	s.InputRequests = nameInput()
	s.TTLMs, s.PollIntervalMs = i64(60000), i64(5000)
	if changed, err := task.Apply(s, applyT0.Add(time.Minute)); err != nil || changed {
		t.Fatalf("changed=%v err=%v", changed, err)
	}

	// Same for a failed task's error.
	task = workingTask()
	s = workingSnap()
	s.Status = StatusFailed
	s.Error = &RPCError{Code: -32603, Message: "boom", Data: json.RawMessage(`{"a":1}`)}
	if _, err := task.Apply(s, applyT0); err != nil {
		t.Fatal(err)
	}
	s.Error = &RPCError{Code: -32603, Message: "boom", Data: json.RawMessage(`{"a":1}`)}
	if changed, _ := task.Apply(s, applyT0.Add(time.Second)); changed {
		t.Fatal("an equal error counted as a change")
	}
}

func TestApplyClearsInputsWhenLeavingInputRequired(t *testing.T) {
	task := workingTask()
	s := workingSnap()
	s.Status = StatusInputRequired
	s.InputRequests = nameInput()
	if _, err := task.Apply(s, applyT0); err != nil {
		t.Fatal(err)
	}
	if len(task.InputRequests) != 1 {
		t.Fatalf("inputs = %+v", task.InputRequests)
	}
	task.MarkAnswered([]string{"name"}, applyT0)

	// Back to working; a sloppy server still echoes the old requests.
	s.Status = StatusWorking
	changed, err := task.Apply(s, applyT0.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if !changed || task.Status != StatusWorking {
		t.Fatalf("changed=%v status=%s", changed, task.Status)
	}
	if task.InputRequests != nil {
		t.Fatalf("stale input requests kept: %+v", task.InputRequests)
	}
	if !task.Answered("name") {
		t.Fatal("answered keys were lost")
	}

	// Completed straight from input_required clears them too.
	task = workingTask()
	s = workingSnap()
	s.Status = StatusInputRequired
	s.InputRequests = nameInput()
	_, _ = task.Apply(s, applyT0)
	s.Status = StatusCompleted
	s.Result = json.RawMessage(`{"content":[]}`)
	if _, err := task.Apply(s, applyT0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if task.InputRequests != nil {
		t.Fatalf("inputs kept on completed: %+v", task.InputRequests)
	}
}

// A 2025-11-25 report of input_required cannot list the questions (they
// come as requests on another stream): the record keeps the ones it holds,
// until the server asks anew or the task moves on.
func TestApplyKeepsInputsNotHeard(t *testing.T) {
	task := workingTask()
	s := workingSnap()
	s.Status = StatusInputRequired
	s.InputRequests = nameInput()
	if _, err := task.Apply(s, applyT0); err != nil {
		t.Fatal(err)
	}
	s.InputRequests, s.InputsUnheard = nil, true
	if changed, err := task.Apply(s, applyT0.Add(time.Second)); err != nil || changed || len(task.InputRequests) != 1 {
		t.Fatalf("changed=%v err=%v inputs=%+v; want the question kept", changed, err, task.InputRequests)
	}
	s.Status = StatusWorking
	if _, err := task.Apply(s, applyT0.Add(2*time.Second)); err != nil || task.InputRequests != nil {
		t.Fatalf("err=%v inputs=%+v; want none once working", err, task.InputRequests)
	}
}

func TestApplyRefusesTerminalToWorking(t *testing.T) {
	for _, term := range []Status{StatusCompleted, StatusFailed, StatusCancelled} {
		t.Run(string(term), func(t *testing.T) {
			task := workingTask()
			s := workingSnap()
			s.Status = term
			s.StatusMessage = "done"
			switch term {
			case StatusCompleted:
				s.Result = json.RawMessage(`{"content":[]}`)
			case StatusFailed:
				s.Error = &RPCError{Code: -32603, Message: "x"}
			}
			if _, err := task.Apply(s, applyT0); err != nil {
				t.Fatal(err)
			}
			before := task.Clone()

			lie := workingSnap()
			lie.StatusMessage = "back from the dead"
			lie.TTLMs = i64(1)
			changed, err := task.Apply(lie, applyT0.Add(time.Minute))
			var te *TransitionError
			if !errors.As(err, &te) || te.From != term || te.To != StatusWorking {
				t.Fatalf("err = %v, want *TransitionError %s → working", err, term)
			}
			if changed {
				t.Error("a refused snapshot reported a change")
			}
			if task.Status != term || task.StatusMessage != "done" || len(task.History) != len(before.History) ||
				!sameInt(task.TTLMs, before.TTLMs) || !task.UpdatedAt.Equal(before.UpdatedAt) {
				t.Errorf("a refused snapshot changed the record: %+v", task)
			}
		})
	}
}

func TestApplyFromCalling(t *testing.T) {
	task := NewIntent(ServerRef{URL: "https://example.com/mcp"}, "compile", nil, "", applyT0)
	s := workingSnap()
	changed, err := task.Apply(s, applyT0.Add(time.Second))
	if err != nil || !changed {
		t.Fatalf("changed=%v err=%v", changed, err)
	}
	if task.TaskID != s.TaskID || task.Status != StatusWorking {
		t.Fatalf("task = %+v", task)
	}
	if h := task.History[len(task.History)-1]; h.From != StatusCalling || h.To != StatusWorking || h.Message != "compiling" {
		t.Fatalf("history = %+v", h)
	}
}

func TestMarkUnknownAndAnswered(t *testing.T) {
	task := workingTask()
	if err := task.MarkUnknown("gone (-32602)", applyT0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if task.Status != StatusUnknown || !task.Status.Terminal() {
		t.Fatalf("status = %s", task.Status)
	}
	task.MarkAnswered([]string{"a", "b"}, applyT0)
	task.MarkAnswered([]string{"b", "c"}, applyT0)
	if got := len(task.AnsweredKeys); got != 3 {
		t.Fatalf("answered keys = %v", task.AnsweredKeys)
	}
	orphan := NewIntent(ServerRef{Name: "x"}, "t", nil, "", applyT0)
	_ = orphan.MoveTo(StatusOrphaned, "", applyT0)
	if err := orphan.MarkUnknown("", applyT0); err == nil {
		t.Fatal("orphaned → unknown was allowed")
	}
}

func TestApplyClipsHugeStatusMessage(t *testing.T) {
	now := time.Now()
	rec := NewIntent(ServerRef{Name: "s"}, "sleep", nil, "", now)
	huge := strings.Repeat("é", 10<<20/2) // 10 MB of two-byte characters
	if _, err := rec.Apply(Snapshot{TaskID: "t", Status: StatusWorking, StatusMessage: huge}, now); err != nil {
		t.Fatal(err)
	}
	if n := len(rec.StatusMessage); n > MaxStatusMessage+len("…") || !strings.HasSuffix(rec.StatusMessage, "…") || !utf8.ValidString(rec.StatusMessage) {
		t.Fatalf("stored status message: %d bytes, valid UTF-8 %v", n, utf8.ValidString(rec.StatusMessage))
	}
	for _, h := range rec.History {
		if len(h.Message) > MaxStatusMessage+len("…") {
			t.Fatalf("history keeps %d bytes", len(h.Message))
		}
	}
	// The same huge message again is no change, hence no write.
	if changed, err := rec.Apply(Snapshot{TaskID: "t", Status: StatusWorking, StatusMessage: huge}, now); err != nil || changed {
		t.Fatalf("repeat: changed=%v err=%v", changed, err)
	}
	if got := ClipStatusMessage("short"); got != "short" {
		t.Fatalf("short message clipped to %q", got)
	}
}

// A snapshot of another task is an invalid answer: the handle on record
// stays, and nothing of the snapshot is taken.
func TestApplyRefusesAnotherTasksSnapshot(t *testing.T) {
	task := workingTask()
	before := task.Clone()
	s := workingSnap()
	s.TaskID = "someone-elses-task"
	s.Status = StatusCompleted
	s.Result = json.RawMessage(`{"content":[]}`)
	changed, err := task.Apply(s, applyT0.Add(time.Second))
	if !errors.Is(err, ErrOtherTask) || changed {
		t.Fatalf("Apply(snapshot of another task) = %v, %v; want ErrOtherTask and no change", changed, err)
	}
	if task.TaskID != before.TaskID || task.Status != before.Status || task.Result != nil {
		t.Fatalf("the record took the other task's snapshot: %+v", task)
	}
}

// A found task's record says what the server listed and is keyed by its
// server and task id; listed again it takes the server's news; adopted
// it is watched (working), left it is never offered again (left), and
// neither is possible twice.
func TestFoundRecord(t *testing.T) {
	t0 := time.Date(2026, 8, 1, 12, 0, 0, 0, time.UTC)
	ref := ServerRef{Name: "sdk"}
	ttl := int64(60000)
	rec := NewFound(ref, Snapshot{TaskID: "t-1", Protocol: "2025-11-25", Status: StatusWorking, StatusMessage: "step 2", TTLMs: &ttl, CreatedAt: t0}, t0)
	if rec.Status != StatusFound || rec.TaskID != "t-1" || rec.IdempotencyKey != FoundKey(ref, "t-1") || *rec.TTLMs != ttl || !rec.ServerCreatedAt.Equal(t0) {
		t.Fatalf("found record %+v", rec)
	}
	if !strings.Contains(rec.StatusMessage, "lists this task working: step 2") {
		t.Fatalf("message %q does not say what the server listed", rec.StatusMessage)
	}
	if rec.Refound(Snapshot{TaskID: "t-1", Status: StatusWorking, StatusMessage: "step 2"}, t0) {
		t.Fatal("the same listing changed the record")
	}
	if !rec.Refound(Snapshot{TaskID: "t-1", Status: StatusCompleted}, t0.Add(time.Second)) || !strings.Contains(rec.StatusMessage, "completed") {
		t.Fatalf("listed completed: %q", rec.StatusMessage)
	}
	adopted, left := *rec, *rec
	if err := adopted.AdoptFound(t0); err != nil || adopted.Status != StatusWorking || adopted.History[len(adopted.History)-1].Message != FoundAdopted {
		t.Fatalf("adopted: %+v, %v", adopted, err)
	}
	if err := left.LeaveFound(t0); err != nil || left.Status != StatusLeft || !left.Status.Terminal() {
		t.Fatalf("left: %+v, %v", left, err)
	}
	if adopted.LeaveFound(t0) == nil || left.AdoptFound(t0) == nil {
		t.Fatal("a decided found task was decided again")
	}
}
