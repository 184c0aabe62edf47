package engine

import (
	"encoding/json"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/internal/hostile"
	"github.com/taskdeck/taskdeck/internal/waitfor"
	"github.com/taskdeck/taskdeck/model"
)

func TestCallCommitsTheHandleBeforeItReturns(t *testing.T) {
	srv := startDemo(t, demo.Options{})
	e := open(t, t.TempDir(), srv, Options{})
	ctx := ctxT(t)
	res, err := e.Call(ctx, deck.CallRequest{Server: demoRef, Tool: "sleep", Args: json.RawMessage(`{"seconds":60}`), Agent: "claude"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Task.TaskID == "" || res.Task.Status != model.StatusWorking {
		t.Fatalf("Call returned %s with task id %q, want working with a handle", res.Task.Status, res.Task.TaskID)
	}
	stored, err := e.store.Get(res.Task.ID)
	if err != nil || stored.TaskID != res.Task.TaskID || stored.Agent != "claude" {
		t.Fatalf("stored %+v, %v: want the handle and the agent committed", stored, err)
	}
}

// One round of input before the task exists costs exactly two tools/call:
// the one that is asked, and the one that carries the answers.
func TestOneInputRoundCostsTwoToolCalls(t *testing.T) {
	srv := startDemo(t, demo.Options{})
	e := open(t, t.TempDir(), srv, Options{})
	ctx := ctxT(t)
	res, err := e.Call(ctx, deck.CallRequest{Server: demoRef, Tool: "confirm_first"})
	if err != nil {
		t.Fatal(err)
	}
	rec := res.Task
	if !res.NeedsInput || rec.Status != model.StatusInputRequired || rec.TaskID != "" || rec.RequestState == "" {
		t.Fatalf("Call = %+v (status %s, task id %q, request state %q), want NeedsInput kept with its request state", res, rec.Status, rec.TaskID, rec.RequestState)
	}
	if _, ok := rec.InputRequests["confirm"]; !ok {
		t.Fatalf("input requests %v, want confirm", rec.InputRequests)
	}
	if n := srv.Calls("confirm_first"); n != 1 {
		t.Fatalf("%d tools/call after Call, want 1", n)
	}
	out, err := e.Continue(ctx, rec.ID, confirmYes)
	if err != nil {
		t.Fatal(err)
	}
	if out.NeedsInput || out.Task.ID != rec.ID || out.Task.TaskID == "" || out.Task.Status != model.StatusWorking {
		t.Fatalf("Continue = %+v (status %s), want the same record, now a working task", out, out.Task.Status)
	}
	if n := srv.Calls("confirm_first"); n != 2 {
		t.Fatalf("%d tools/call in all, want 2", n)
	}
	if out.Task.RequestState != "" || out.Task.InputRequests != nil {
		t.Fatalf("the task keeps the call's input round: %+v", out.Task)
	}
}

func TestAnswersGivenUpFrontAnswerTheRoundAtOnce(t *testing.T) {
	srv := startDemo(t, demo.Options{})
	e := open(t, t.TempDir(), srv, Options{})
	res, err := e.Call(ctxT(t), deck.CallRequest{Server: demoRef, Tool: "confirm_first", Answers: confirmYes})
	if err != nil {
		t.Fatal(err)
	}
	if res.NeedsInput || res.Task.TaskID == "" {
		t.Fatalf("Call = %+v, want a task", res)
	}
	if n := srv.Calls("confirm_first"); n != 2 {
		t.Fatalf("%d tools/call, want 2", n)
	}
}

// A call that needs input survives a restart: it is not orphaned, never
// polled (it has no task), and can be answered then.
func TestNeedsInputSurvivesRestartAndContinues(t *testing.T) {
	srv := startDemo(t, demo.Options{})
	dir := t.TempDir()
	e := open(t, dir, srv, Options{})
	ctx := ctxT(t)
	res, err := e.Call(ctx, deck.CallRequest{Server: demoRef, Tool: "confirm_first"})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}

	e = open(t, dir, srv, Options{})
	f, err := e.Watch(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	over := next(t, f, 5*time.Second, "reconcile over", func(ev deck.Event) bool { return ev.Kind == deck.EventReconcile && ev.Reconcile.Over })
	if over.Reconcile.Total != 0 || over.Reconcile.Orphaned != 0 {
		t.Fatalf("reconcile %+v, want nothing to poll and nothing orphaned", *over.Reconcile)
	}
	got, err := e.Get(ctx, res.Task.ID[:12])
	if err != nil {
		t.Fatal(err)
	}
	if !got.Task.NeedsInput() {
		t.Fatalf("after restart the record is %s (task id %q), want it still waiting for input", got.Task.Status, got.Task.TaskID)
	}
	if n := gets(srv); n != 0 {
		t.Fatalf("%d tasks/get for a call with no task", n)
	}
	// Answer on such a record is Continue.
	rec, err := e.Answer(ctx, res.Task.ID, confirmYes)
	if err != nil {
		t.Fatal(err)
	}
	if rec.TaskID == "" || rec.Status != model.StatusWorking {
		t.Fatalf("after Answer: %s, task id %q, want a working task", rec.Status, rec.TaskID)
	}
	if n := srv.Calls("confirm_first"); n != 2 {
		t.Fatalf("%d tools/call in all, want 2", n)
	}
}

func TestContinueAccumulatesAndRefusesBadAnswers(t *testing.T) {
	srv := startDemo(t, demo.Options{})
	e := open(t, t.TempDir(), srv, Options{})
	ctx := ctxT(t)
	res, err := e.Call(ctx, deck.CallRequest{Server: demoRef, Tool: "confirm_first"})
	if err != nil {
		t.Fatal(err)
	}
	id := res.Task.ID
	_, err = e.Continue(ctx, id, map[string]json.RawMessage{"nope": json.RawMessage(`{"action":"accept"}`)})
	kindIs(t, err, deck.KindUsage)
	_, err = e.Continue(ctx, id, map[string]json.RawMessage{"confirm": json.RawMessage(`{"action":"maybe"}`)})
	kindIs(t, err, deck.KindUsage)
	// No answers: nothing is sent while a key is unanswered.
	out, err := e.Continue(ctx, id, nil)
	if err != nil || !out.NeedsInput {
		t.Fatalf("Continue with no answers = %+v, %v; want it still waiting", out, err)
	}
	if n := srv.Calls("confirm_first"); n != 1 {
		t.Fatalf("%d tools/call, want 1: no answer was complete", n)
	}
	out, err = e.Continue(ctx, id, confirmYes)
	if err != nil || out.Task.TaskID == "" {
		t.Fatalf("Continue = %+v, %v", out, err)
	}
	_, err = e.Continue(ctx, id, confirmYes)
	kindIs(t, err, deck.KindState)
}

// The same call under the same key, while it waits for input, is that
// record, still waiting: nothing is sent.
func TestKeyReusesACallThatNeedsInput(t *testing.T) {
	srv := startDemo(t, demo.Options{})
	e := open(t, t.TempDir(), srv, Options{})
	ctx := ctxT(t)
	req := deck.CallRequest{Server: demoRef, Tool: "confirm_first", Key: "once"}
	first, err := e.Call(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	again, err := e.Call(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Reused || !again.NeedsInput || again.Task.ID != first.Task.ID {
		t.Fatalf("again = %+v, want the first record reused, still needing input", again)
	}
	if n := srv.Calls("confirm_first"); n != 1 {
		t.Fatalf("%d tools/call, want 1", n)
	}
}

// A server that asks for input round after round is given up on after ten
// rounds: the record ends failed, and says why.
func TestInputRoundsAreBounded(t *testing.T) {
	srv := startDemo(t, demo.Options{})
	var mu sync.Mutex
	var asked map[string]json.RawMessage
	srv.On("tools/call", srv.Rewrite(func(res map[string]json.RawMessage) {
		mu.Lock()
		defer mu.Unlock()
		if asked == nil {
			asked = maps.Clone(res)
			return
		}
		for k := range res {
			res[k] = nil
		}
		maps.Copy(res, asked) // the first round's ask, again and again
	}))
	e := open(t, t.TempDir(), srv, Options{})
	ctx := ctxT(t)
	res, err := e.Call(ctx, deck.CallRequest{Server: demoRef, Tool: "confirm_first"})
	if err != nil {
		t.Fatal(err)
	}
	for round := 2; round < 10; round++ {
		if res, err = e.Continue(ctx, res.Task.ID, confirmYes); err != nil || !res.NeedsInput {
			t.Fatalf("round %d: %+v, %v; want input asked again", round, res, err)
		}
	}
	res, err = e.Continue(ctx, res.Task.ID, confirmYes)
	if err == nil || res.Task.Status != model.StatusFailed || !strings.Contains(err.Error(), "asked for input 10 times") {
		t.Fatalf("round 10: %+v, %v; want the call given up, failed", res.Task, err)
	}
	if n := srv.Calls("confirm_first"); n != 10 {
		t.Fatalf("%d tools/call, want 10", n)
	}
}

// TestContinueWhoseTaskIsBornWaiting: a continued call whose handle
// arrives input_required (its payload fetched at once with tasks/get)
// returns, and the engine still closes: Continue no longer holds the
// task's lock into that first poll, which takes it again.
func TestContinueWhoseTaskIsBornWaiting(t *testing.T) {
	srv := startDemo(t, demo.Options{})
	e := open(t, t.TempDir(), srv, Options{})
	ctx := ctxT(t)
	res, err := e.Call(ctx, deck.CallRequest{Server: demoRef, Tool: "confirm_first"})
	if err != nil || !res.NeedsInput {
		t.Fatalf("Call = %+v, %v; want NeedsInput", res, err)
	}
	srv.On("tools/call", srv.Rewrite(hostile.Set(map[string]string{"status": `"input_required"`})))
	done := make(chan error, 1)
	go func() {
		_, err := e.Continue(ctx, res.Task.ID, confirmYes)
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(waitfor.Scale(10 * time.Second)):
		t.Fatal("Continue of a call whose task is born input_required did not return within 10 s (scaled)")
	}
	if gets(srv) == 0 {
		t.Fatal("the born-waiting handle's payload was not fetched")
	}
}
