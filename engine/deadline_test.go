package engine

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/internal/hostile"
	"github.com/taskdeck/taskdeck/internal/pgtest"
	"github.com/taskdeck/taskdeck/internal/waitfor"
	mcpconfig "github.com/taskdeck/taskdeck/mcpclient/config"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/notify"
)

// deadlineHook configures srv as "demo" with the server entry's extra
// keys, and a command hook that writes each event it is told of to a
// file named by the event's id in the directory it returns (a receiver
// de-duplicating by id: delivery is at least once).
func deadlineHook(t *testing.T, srv *hostile.Server, entry string) (*mcpconfig.Config, string) {
	t.Helper()
	hook, got := eventHook(t)
	cfg, err := mcpconfig.ParseConfig("test.json", fmt.Appendf(nil,
		`{"mcpServers":{"demo":{"url":%q%s}},"notify":{"commands":[{"argv":[%q,%q],"events":["deadline","completed","cancelled"]}]}}`,
		srv.URL, entry, hook, got))
	if err != nil {
		t.Fatal(err)
	}
	return cfg, got
}

// eventHook is a command hook that writes each event it is told of to a
// file named by the event's id in the directory it returns (its argument).
func eventHook(t *testing.T) (hook, got string) {
	t.Helper()
	dir := t.TempDir()
	got = filepath.Join(dir, "events")
	hook = filepath.Join(dir, "hook.sh")
	script := "#!/bin/sh\nf=\"$1/$TASKDECK_EVENT_ID\"\ncat > \"$f.$$\" && mv \"$f.$$\" \"$f.json\"\n"
	if err := os.Mkdir(got, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(hook, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	return hook, got
}

// told is what the hook was told, one payload per event id.
func told(t *testing.T, dir string) []notify.Payload {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	var out []notify.Payload
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var p notify.Payload
		if err := json.Unmarshal(b, &p); err != nil {
			t.Fatalf("the hook was given %q: %v", b, err)
		}
		out = append(out, p)
	}
	return out
}

func countOf(ps []notify.Payload, typ, id string) int {
	n := 0
	for _, p := range ps {
		if p.Type == typ && p.Data.Task.ID == id {
			n++
		}
	}
	return n
}

// waiting calls approve and waits until the task waits for its answer.
func waiting(t *testing.T, e *Engine) *model.Task {
	t.Helper()
	ctx := ctxT(t)
	res, err := e.Call(ctx, deck.CallRequest{Server: demoRef, Tool: "approve", Args: json.RawMessage(`{"action":"deploy"}`)})
	if err != nil {
		t.Fatal(err)
	}
	var rec *model.Task
	waitFor(t, 10*time.Second, "the approve task to wait for input", func() bool {
		en, err := e.Get(ctx, res.Task.ID)
		rec = en.Task
		return err == nil && rec.WaitsForInput()
	})
	return rec
}

// A server's configured deadline on its waits for input (issue 27): the
// task's entry carries it from the wait's start; at the deadline the
// engine commits the deadline event to the outbox with its escalation,
// and the hook is told once, with the questions and the command that
// answers them. An engine opened again over the same store (a restart)
// tells nothing again: the record says the wait was told.
func TestDeadlineEscalatesOnceThroughOutbox(t *testing.T) {
	srv := startDemo(t, demo.Options{})
	limit := waitfor.Scale(300 * time.Millisecond)
	cfg, got := deadlineHook(t, srv, fmt.Sprintf(`,"deadline":%q`, limit))
	dir := t.TempDir()
	e := open(t, dir, srv, Options{Config: cfg})
	ctx := ctxT(t)
	if err := e.PollNow(ctx, nil); err != nil {
		t.Fatal(err)
	}
	rec := waiting(t, e)
	waitFor(t, 10*time.Second, "the deadline event to reach the hook", func() bool {
		return countOf(told(t, got), "task.deadline", rec.ID) > 0
	})
	var ev notify.Payload
	for _, p := range told(t, got) {
		if p.Type == "task.deadline" {
			ev = p
		}
	}
	d := ev.Data.Deadline
	if d == nil || !d.At.Equal(rec.WaitingSince().Add(limit)) || d.SetBy != "" || d.Outcome != "" {
		t.Fatalf("deadline event's deadline %+v, want the wait's start %s + %s, from the config, nothing done besides", d, rec.WaitingSince(), limit)
	}
	if len(ev.Data.Questions) != 1 || ev.Data.Questions[0].Key != "approve-1" || !strings.HasPrefix(ev.Data.Answer, "taskdeck answer "+rec.ID) {
		t.Fatalf("deadline event %+v: want the question approve-1 and the answer command", ev.Data)
	}
	en, err := e.Get(ctx, rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	if en.Poll.AnswerBy == nil || en.Poll.AnswerBy.Escalated.IsZero() || en.Task.Status != model.StatusInputRequired {
		t.Fatalf("after the deadline: entry deadline %+v, status %s; want it escalated, the task still waiting", en.Poll.AnswerBy, en.Task.Status)
	}
	log, err := e.Audit(ctx, model.AuditFilter{Task: rec.ID})
	if err != nil {
		t.Fatal(err)
	}
	var escalations []model.AuditEntry
	for _, a := range log.Entries {
		if a.Act == model.ActEscalate {
			escalations = append(escalations, a)
		}
	}
	if len(escalations) != 1 || escalations[0].Actor.Role != model.RoleEngine {
		t.Fatalf("audit: %d escalations (%+v), want one, the engine's", len(escalations), escalations)
	}

	// A restart: the wait was told; the answer that ends the task is the
	// next thing the hook hears of it.
	e.Close()
	e = open(t, dir, srv, Options{Config: cfg})
	if err := e.PollNow(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Answer(ctx, rec.ID, map[string]json.RawMessage{"approve-1": json.RawMessage(`{"action":"accept","content":{"approve":true,"reason":"late"}}`)}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the completion to reach the hook", func() bool {
		return countOf(told(t, got), "task.completed", rec.ID) == 1
	})
	if n := countOf(told(t, got), "task.deadline", rec.ID); n != 1 {
		t.Fatalf("the hook was told of the deadline %d times, want once across the restart", n)
	}
}

// An operator's deadline (issue 27): one in the past and one on a task
// that waits for no answer are refused; one set is the operator's act,
// named in the audit and in the event, and replaces the config's.
func TestSetDeadline(t *testing.T) {
	srv := startDemo(t, demo.Options{})
	cfg, got := deadlineHook(t, srv, `,"deadline":"2h"`)
	e := open(t, t.TempDir(), srv, Options{Config: cfg})
	ctx := ctxT(t)
	if err := e.PollNow(ctx, nil); err != nil {
		t.Fatal(err)
	}
	rec := waiting(t, e)
	en, err := e.Get(ctx, rec.ID)
	if err != nil || en.Poll.AnswerBy == nil || !en.Poll.AnswerBy.At.Equal(rec.WaitingSince().Add(2*time.Hour)) || !en.Poll.AnswerBy.By.IsZero() {
		t.Fatalf("entry deadline %+v (%v), want the config's: the wait's start + 2h", en.Poll.AnswerBy, err)
	}

	_, err = e.SetDeadline(ctx, rec.ID, time.Now().Add(-time.Minute))
	if de := kindIs(t, err, deck.KindUsage); !strings.Contains(de.Message, "is in the past") {
		t.Fatalf("a deadline in the past: %v", err)
	}
	echo, err := e.Call(ctx, deck.CallRequest{Server: demoRef, Tool: "echo", Args: json.RawMessage(`{"text":"x"}`)})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.SetDeadline(ctx, echo.Task.ID, time.Now().Add(time.Hour))
	if de := kindIs(t, err, deck.KindState); !strings.Contains(de.Message, "waits for no answer") {
		t.Fatalf("a deadline on a task that waits for nothing: %v", err)
	}

	alice := model.Actor{Name: "alice", Role: model.RoleOperator}
	at := time.Now().Add(waitfor.Scale(300 * time.Millisecond))
	set, err := e.SetDeadline(deck.WithActor(ctx, alice), rec.ID, at)
	if err != nil {
		t.Fatal(err)
	}
	if d := set.WaitDeadline; d == nil || !d.At.Equal(at) || d.By.Name != "alice" {
		t.Fatalf("record's deadline %+v, want alice's at %s", d, at)
	}
	waitFor(t, 10*time.Second, "the deadline event to reach the hook", func() bool {
		return countOf(told(t, got), "task.deadline", rec.ID) == 1
	})
	for _, p := range told(t, got) {
		if p.Type == "task.deadline" && (p.Data.Deadline == nil || p.Data.Deadline.SetBy != "alice" || !p.Data.Deadline.At.Equal(at.UTC())) {
			t.Fatalf("the event's deadline %+v, want alice's at %s", p.Data.Deadline, at)
		}
	}
	log, err := e.Audit(ctx, model.AuditFilter{Task: rec.ID})
	if err != nil {
		t.Fatal(err)
	}
	var acts []string
	for _, a := range log.Entries {
		acts = append(acts, a.Act+" by "+a.Actor.Name)
	}
	if !strings.Contains(strings.Join(acts, ", "), "deadline by alice, escalate by engine") {
		t.Fatalf("audit %v: want alice's deadline, then the engine's escalation", acts)
	}
}

// "onDeadline" (issue 27): decline answers the unanswered question with
// a decline as the engine's act (the demo's approve then ends "not
// approved"); cancel cancels the task. The event says which.
func TestOnDeadline(t *testing.T) {
	for _, tc := range []struct {
		on     string
		status model.Status
	}{
		{"decline", model.StatusCompleted},
		{"cancel", model.StatusCancelled},
	} {
		t.Run(tc.on, func(t *testing.T) {
			srv := startDemo(t, demo.Options{})
			cfg, got := deadlineHook(t, srv, fmt.Sprintf(`,"deadline":%q,"onDeadline":%q`, waitfor.Scale(200*time.Millisecond), tc.on))
			e := open(t, t.TempDir(), srv, Options{Config: cfg})
			ctx := ctxT(t)
			if err := e.PollNow(ctx, nil); err != nil {
				t.Fatal(err)
			}
			rec := waiting(t, e)
			var end *model.Task
			waitFor(t, 10*time.Second, "the task to end after its deadline", func() bool {
				en, err := e.Get(ctx, rec.ID)
				end = en.Task
				return err == nil && end.Status.Terminal()
			})
			if end.Status != tc.status {
				t.Fatalf("after the deadline the task is %s (%s), want %s", end.Status, end.StatusMessage, tc.status)
			}
			if tc.on == "decline" {
				a, ok := end.LastAnswer("approve-1")
				if !ok || a.By.Role != model.RoleEngine || !strings.Contains(string(a.Response), "decline") {
					t.Fatalf("answer %+v, want the engine's decline", a)
				}
			}
			waitFor(t, 10*time.Second, "the deadline event to reach the hook", func() bool {
				return countOf(told(t, got), "task.deadline", rec.ID) == 1
			})
			for _, p := range told(t, got) {
				if p.Type == "task.deadline" && (p.Data.Deadline == nil || !strings.Contains(p.Data.Deadline.Outcome, "onDeadline: "+tc.on)) {
					t.Fatalf("the event's deadline %+v, want the outcome named", p.Data.Deadline)
				}
			}
		})
	}
}

// On a PostgreSQL fleet (issue 27) each wait is escalated by one engine,
// the one watching it: two engines with the same deadline and the same
// hook, six waits spread over them, and each wait's deadline event is
// committed once (one event id) and its escalation audited once.
func TestFleetDeadlineEscalatedOnce(t *testing.T) {
	srv := startDemo(t, demo.Options{})
	db := pgtest.DB(t)
	limit := waitfor.Scale(500 * time.Millisecond)
	_, got := deadlineHook(t, srv, "")
	hook := filepath.Join(filepath.Dir(got), "hook.sh")
	var es []*Engine
	for i := range 2 {
		cfg, err := mcpconfig.ParseConfig("test.json", fmt.Appendf(nil,
			`{"mcpServers":{"demo":{"url":%q,"deadline":%q}},"notify":{"commands":[{"argv":[%q,%q],"events":["deadline"]}]}}`,
			fmt.Sprintf("%s?engine=%d", srv.URL, i), limit, hook, got))
		if err != nil {
			t.Fatal(err)
		}
		e := open(t, t.TempDir(), srv, Options{Store: db, Claim: true, Config: cfg, ClaimLease: testLease, ClaimRenew: testRenew})
		if err := e.PollNow(ctxT(t), nil); err != nil {
			t.Fatal(err)
		}
		es = append(es, e)
	}
	ctx := ctxT(t)
	var ids []string
	for i := range 6 {
		res, err := es[i%2].Call(ctx, deck.CallRequest{Server: demoRef, Tool: "approve", Args: fmt.Appendf(nil, `{"action":"a%d"}`, i)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.Task.ID)
	}
	waitFor(t, 30*time.Second, "a deadline event of each wait", func() bool {
		ps := told(t, got)
		for _, id := range ids {
			if countOf(ps, "task.deadline", id) == 0 {
				return false
			}
		}
		return true
	})
	ps := told(t, got)
	for _, id := range ids {
		if n := countOf(ps, "task.deadline", id); n != 1 {
			t.Errorf("task %s: %d deadline events, want one", id, n)
		}
		log, err := es[0].Audit(ctx, model.AuditFilter{Task: id})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, a := range log.Entries {
			if a.Act == model.ActEscalate {
				n++
			}
		}
		if n != 1 {
			t.Errorf("task %s: %d escalations audited, want one", id, n)
		}
	}
}
