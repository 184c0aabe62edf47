package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/internal/hostile"
	"github.com/taskdeck/taskdeck/internal/waitfor"
	"github.com/taskdeck/taskdeck/mcpclient"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store/badger"
)

// Handles and answers a real server would not send: a tracker over a real
// store, in front of it internal/hostile's misbehaving server.

// newHostileEnv is newEnv's tracker in front of a hostile server, which
// e.ref names by URL.
func newHostileEnv(t *testing.T) (*env, *hostile.Server) {
	t.Helper()
	h := hostile.Start(t, demo.Options{Speed: 0.05, PollInterval: 20 * time.Millisecond})
	e := &env{t: t, demo: h.Demo, ref: model.ServerRef{URL: h.URL}}
	var err error
	if e.store, err = badger.Open(t.TempDir(), nil); err != nil {
		t.Fatal(err)
	}
	e.pool = mcpclient.NewPool(mcpclient.PoolOptions{})
	e.tracker = newTracker(e.store, e.pool, trackerOptions{Policy: trackerPolicy, RequestTimeout: waitfor.Scale(5 * time.Second)})
	t.Cleanup(func() {
		e.pool.Close()
		e.store.Close()
	})
	return e, h
}

func (e *env) stored(id string) *model.Task {
	e.t.Helper()
	rec, err := e.store.Get(id)
	if err != nil {
		e.t.Fatal(err)
	}
	return rec
}

// A handle the client cannot read is still a task the server created: the
// intent is orphaned (the work may run), never "refused".
func TestUndecodableHandleLeavesAnOrphan(t *testing.T) {
	for name, fields := range map[string]map[string]string{
		"unknown status":      {"status": `"running-ish"`},
		"ttlMs not a number":  {"ttlMs": `"x"`},
		"pollIntervalMs 0.5":  {"pollIntervalMs": `0.5`},
		"taskId not a string": {"taskId": `42`},
	} {
		t.Run(name, func(t *testing.T) {
			e, h := newHostileEnv(t)
			h.On("tools/call", h.Rewrite(hostile.Set(fields)))
			_, _, err := tupled(e.tracker.Call(context.Background(), callRequest{Server: e.ref, Tool: "sleep", Args: json.RawMessage(`{"seconds":60}`), Key: "k"}))
			if err == nil {
				t.Fatal("an undecodable handle was accepted")
			}
			all, _ := e.store.All()
			if len(all) != 1 || all[0].Status != model.StatusOrphaned || strings.Contains(all[0].StatusMessage, "refused") {
				t.Fatalf("after an undecodable handle the store has %+v; want one orphaned intent", all)
			}
			if e.demo.Stats().TasksCreated != 1 {
				t.Fatal("the server created no task")
			}
			// The orphan holds its key: the call is not sent again.
			rec, reused, err := tupled(e.tracker.Call(context.Background(), callRequest{Server: e.ref, Tool: "sleep", Args: json.RawMessage(`{"seconds":60}`), Key: "k"}))
			if err != nil || !reused || rec.ID != all[0].ID || len(h.Requests("tools/call")) != 1 {
				t.Fatalf("the orphan's key: %v reused=%v, %d tools/call", err, reused, len(h.Requests("tools/call")))
			}
		})
	}
}

// 500.0 is 500: a handle and a poll answer with integral floats decode.
func TestIntegralFloatsInAHandleDecode(t *testing.T) {
	e, h := newHostileEnv(t)
	floats := h.Rewrite(hostile.Set(map[string]string{"pollIntervalMs": "500.0", "ttlMs": "6e5"}))
	h.On("tools/call", floats)
	h.On("tasks/get", floats)
	rec, _, err := tupled(e.tracker.Call(context.Background(), callRequest{Server: e.ref, Tool: "sleep", Args: json.RawMessage(`{"seconds":60}`)}))
	if err != nil || rec.Status != model.StatusWorking || *rec.PollIntervalMs != 500 || *rec.TTLMs != 600000 {
		t.Fatalf("call with pollIntervalMs 500.0: %+v, %v", rec, err)
	}
	before := time.Now()
	res, err := e.tracker.Poll(context.Background(), rec.ID)
	// The next poll is due 500 ms after this one went out.
	if next := e.tracker.pollStatus(rec.ID).Next.Sub(before); err != nil || res.Err != nil || next < 500*time.Millisecond {
		t.Fatalf("poll with pollIntervalMs 500.0: next in %v, %v, %v", next, res.Err, err)
	}
}

// A tasks/get answer about another task is an invalid answer: the handle
// on record stays, and so does the task's state.
func TestAnswerAboutAnotherTaskKeepsTheHandle(t *testing.T) {
	e, h := newHostileEnv(t)
	rec := e.call("sleep", `{"seconds":60}`, "")
	h.On("tasks/get", h.Rewrite(hostile.Set(map[string]string{"taskId": `"someone-elses-task"`, "status": `"completed"`,
		"result": `{"content":[{"type":"text","text":"not yours"}]}`})))
	res, err := e.tracker.Poll(context.Background(), rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	got := e.stored(rec.ID)
	if res.Err == nil || got.TaskID != rec.TaskID || got.Status != model.StatusWorking || res.Next <= 0 {
		t.Fatalf("after an answer about another task: stored taskId changed=%v status %s, poll err %v, next %v; want the handle kept, an error, polling on",
			got.TaskID != rec.TaskID, got.Status, res.Err, res.Next)
	}
	h.On("tasks/get", nil)
	e.watch(rec.ID, func(r *model.Task) bool { return r.TaskID == rec.TaskID && strings.HasPrefix(r.StatusMessage, "slept") })
}

// A server's huge delays are clamped: the task is polled again within
// model.MaxServerWait (plus jitter), never dropped by a delay that
// wrapped around.
func TestHugeServerDelaysAreClamped(t *testing.T) {
	e, h := newHostileEnv(t)
	huge := h.Rewrite(hostile.Set(map[string]string{"pollIntervalMs": "9000000000000"}))
	h.On("tools/call", huge)
	h.On("tasks/get", huge)
	rec := e.call("sleep", `{"seconds":60}`, "")
	limit := model.MaxServerWait + time.Duration(float64(model.MaxServerWait)*trackerPolicy.Jitter)
	res, err := e.tracker.Poll(context.Background(), rec.ID)
	if err != nil || res.Next <= 0 || res.Next > limit {
		t.Fatalf("pollIntervalMs 9e12: next poll in %v (%v); want within (0, %v]", res.Next, err, limit)
	}
	h.On("tasks/get", hostile.Busy("99999999999"))
	res, err = e.tracker.Poll(context.Background(), rec.ID)
	if err != nil || res.Err == nil || res.Next <= 0 || res.Next > limit {
		t.Fatalf("Retry-After 99999999999: next poll in %v (%v, %v); want within (0, %v]", res.Next, res.Err, err, limit)
	}
}

// A handle that is already terminal carries no result (or error): it is
// fetched with tasks/get, and the record ends with it.
func TestTerminalHandleFetchesItsPayload(t *testing.T) {
	e := newEnv(t)
	rec := e.call(demo.InstantTool, `{"text":"at once"}`, "")
	if rec.Status != model.StatusCompleted || len(rec.Result) == 0 {
		t.Fatalf("instant: %s with result %s; want completed with its result", rec.Status, rec.Result)
	}
	if got := resultText(t, rec); got != "instant: at once" {
		t.Fatalf("instant result %q", got)
	}
	rec = e.call(demo.InstantTool, `{"mode":"error"}`, "")
	if rec.Status != model.StatusFailed || rec.Error == nil || rec.Error.Message != "instant failure" {
		t.Fatalf("instant error: %s with error %+v; want failed with the server's error", rec.Status, rec.Error)
	}
	if st := e.demo.Stats(); st.Gets != 2 {
		t.Fatalf("%d tasks/get for two terminal handles, want one each", st.Gets)
	}
}

// If the fetch fails, the record stays open and a later poll gets the
// result: it is never stored as ended without it.
func TestTerminalHandleWhoseFetchFailsStaysOpen(t *testing.T) {
	e, h := newHostileEnv(t)
	h.On("tasks/get", hostile.Busy("0"))
	rec, _, err := tupled(e.tracker.Call(context.Background(), callRequest{Server: e.ref, Tool: demo.InstantTool, Args: json.RawMessage(`{"text":"later"}`)}))
	if err != nil || rec.Status.Terminal() || rec.TaskID == "" {
		t.Fatalf("terminal handle, failed fetch: %+v, %v; want an open record with its handle", rec, err)
	}
	h.On("tasks/get", nil)
	seen := e.watch(rec.ID, ended)
	if got := seen[len(seen)-1]; got.Status != model.StatusCompleted || resultText(t, got) != "instant: later" {
		t.Fatalf("after the fetch: %s %s", got.Status, got.Result)
	}
}

// A server that no longer speaks the extension (-32601 on tasks/get)
// settles the record as unknown with a message that says so; nothing
// polls it again.
func TestServerWithoutTheExtensionSettlesTheRecord(t *testing.T) {
	e, h := newHostileEnv(t)
	rec := e.call("sleep", `{"seconds":60}`, "")
	h.On("tasks/get", hostile.Error(-32601, `JSON RPC not handled: "tasks/get" unsupported`))
	res, err := e.tracker.Poll(context.Background(), rec.ID)
	if err != nil || res.Task.Status != model.StatusUnknown || res.Next != 0 || !strings.Contains(res.Task.StatusMessage, "no longer speaks the tasks extension") {
		t.Fatalf("after -32601: status %s %q, next %v, err %v", res.Task.Status, res.Task.StatusMessage, res.Next, err)
	}
	if got := e.stored(rec.ID); got.Status != model.StatusUnknown {
		t.Fatalf("stored %s", got.Status)
	}
}

// A cancel the server never acknowledged leaves the record as it was.
func TestFailedCancelIsNotRecordedAsRequested(t *testing.T) {
	e, h := newHostileEnv(t)
	rec := e.call("sleep", `{"seconds":60}`, "")
	h.On("tasks/cancel", hostile.Busy("0"))
	if _, err := e.tracker.Cancel(context.Background(), rec.ID); err == nil {
		t.Fatal("a cancel answered 503 succeeded")
	}
	if got := e.stored(rec.ID); got.CancelRequested {
		t.Fatal("a failed cancel marked the record cancel-requested")
	}
	h.On("tasks/cancel", hostile.Error(-32603, "boom internal"))
	if _, err := e.tracker.Cancel(context.Background(), rec.ID); err == nil || !strings.Contains(err.Error(), "refused the cancel") ||
		!strings.Contains(err.Error(), "not cancelled") || !strings.Contains(err.Error(), "boom internal") {
		t.Fatalf("a cancel answered -32603: %v; want it to say the server refused the cancel and why", err)
	}
	h.On("tasks/cancel", hostile.Error(-32602, "Failed to retrieve task: Task not found"))
	if got, err := e.tracker.Cancel(context.Background(), rec.ID); err == nil || got.Status != model.StatusWorking || got.CancelRequested {
		t.Fatalf("cancel answered -32602 while tasks/get still reports the task: %v, %+v; want an error and the record unchanged", err, got)
	}
	h.On("tasks/cancel", hostile.Error(-32601, "method not found"))
	got, err := e.tracker.Cancel(context.Background(), rec.ID)
	if err == nil || got.CancelRequested || got.Status != model.StatusUnknown {
		t.Fatalf("cancel answered -32601: %v, %+v; want an error and an unknown record", err, got)
	}
	// -32602 to both: the task is gone, so nothing is left to cancel.
	rec = e.call("sleep", `{"seconds":60}`, "")
	gone := hostile.Error(-32602, "Failed to retrieve task: Task not found")
	h.On("tasks/cancel", gone)
	h.On("tasks/get", gone)
	if got, err := e.tracker.Cancel(context.Background(), rec.ID); err != nil || got.Status != model.StatusUnknown {
		t.Fatalf("cancel of a vanished task: %v, %+v; want an unknown record", err, got)
	}
}

// waitForInput calls approve and polls it until it asks for input.
func (e *env) waitForInput() (*model.Task, string) {
	e.t.Helper()
	rec := e.call("approve", `{"action":"deploy"}`, "")
	seen := e.watch(rec.ID, waitsForInput)
	rec = seen[len(seen)-1]
	return rec, rec.PendingInputs()[0]
}

var approveYes = json.RawMessage(`{"action":"accept","content":{"approve":true,"reason":"ok"}}`)

// An answer the server refused is dropped, and may be given again; the
// task is still polled and the watch on it ends (it waits for input).
func TestRefusedAnswerCanBeGivenAgain(t *testing.T) {
	for name, code := range map[string]int64{"-32000": -32000, "-32602 while the task lives": -32602} {
		t.Run(name, func(t *testing.T) {
			e, h := newHostileEnv(t)
			rec, key := e.waitForInput()
			h.On("tasks/update", hostile.Error(code, "answer rejected"))
			_, err := e.tracker.Answer(context.Background(), rec.ID, map[string]json.RawMessage{key: approveYes})
			var ae *answerError
			if !errors.As(err, &ae) || !strings.Contains(err.Error(), "refused") {
				t.Fatalf("answer the server rejected: %v; want an *answerError saying it was refused", err)
			}
			got := e.stored(rec.ID)
			if got.Status != model.StatusInputRequired || got.Answered(key) || len(got.PendingAnswers) != 0 {
				t.Fatalf("after a refused answer: %s, answered %v, pending %v; want input_required, answerable again", got.Status, got.AnsweredKeys, got.PendingAnswers)
			}
			updates, gets := len(h.Requests("tasks/update")), len(h.Requests("tasks/get"))
			res, err := e.tracker.Poll(context.Background(), rec.ID)
			if err != nil || res.Err != nil || len(h.Requests("tasks/get")) == gets || len(h.Requests("tasks/update")) != updates {
				t.Fatalf("poll after a refused answer: %v %v, %d tasks/update re-sent, tasks/get sent %v",
					err, res.Err, len(h.Requests("tasks/update"))-updates, len(h.Requests("tasks/get")) > gets)
			}
			h.On("tasks/update", nil)
			if _, err := e.tracker.Answer(context.Background(), rec.ID, map[string]json.RawMessage{key: approveYes}); err != nil {
				t.Fatalf("answering again: %v", err)
			}
			seen := e.watch(rec.ID, ended)
			if got := seen[len(seen)-1]; got.Status != model.StatusCompleted || resultText(t, got) != "approved deploy: ok" {
				t.Fatalf("after answering again: %s %s", got.Status, got.Result)
			}
		})
	}
}

// -32602 to tasks/update, confirmed by -32602 to tasks/get: the task is
// gone, and the answer is not reported as given.
func TestAnswerToAVanishedTaskSaysSo(t *testing.T) {
	e, h := newHostileEnv(t)
	rec, key := e.waitForInput()
	gone := hostile.Error(-32602, "Failed to retrieve task: Task not found")
	h.On("tasks/update", gone)
	h.On("tasks/get", gone)
	_, err := e.tracker.Answer(context.Background(), rec.ID, map[string]json.RawMessage{key: approveYes})
	if !errors.Is(err, mcpclient.ErrTaskUnknown) {
		t.Fatalf("answer to a vanished task: %v; want ErrTaskUnknown", err)
	}
	if got := e.stored(rec.ID); got.Status != model.StatusUnknown {
		t.Fatalf("stored %s, want unknown", got.Status)
	}
}

// An answer whose send failed on the way stays pending, and the poll still
// asks for the task's state.
func TestPollAsksForTheStateWhenTheResendFails(t *testing.T) {
	e, h := newHostileEnv(t)
	rec, key := e.waitForInput()
	h.On("tasks/update", hostile.Busy("0"))
	if _, err := e.tracker.Answer(context.Background(), rec.ID, map[string]json.RawMessage{key: approveYes}); err == nil {
		t.Fatal("an update answered 503 succeeded")
	}
	if got := e.stored(rec.ID); got.PendingAnswers[key] == nil {
		t.Fatal("an answer whose send failed is no longer pending")
	}
	gets := len(h.Requests("tasks/get"))
	res, err := e.tracker.Poll(context.Background(), rec.ID)
	if err != nil || res.Err == nil || len(h.Requests("tasks/get")) == gets {
		t.Fatalf("poll with a failing re-send: %v %v, tasks/get sent %v", err, res.Err, len(h.Requests("tasks/get")) > gets)
	}
	// The re-send refused: the answer is dropped, the state still asked
	// for, and the task waits for input again (a watch lets it go).
	h.On("tasks/update", hostile.Error(-32000, "answer rejected"))
	gets = len(h.Requests("tasks/get"))
	res, err = e.tracker.Poll(context.Background(), rec.ID)
	var ae *answerError
	if err != nil || !errors.As(res.Err, &ae) || len(h.Requests("tasks/get")) == gets || !res.Task.WaitsForInput() || res.Task.PendingAnswers != nil {
		t.Fatalf("poll with a refused re-send: %v %v, tasks/get sent %v, waits for input %v, pending %v",
			err, res.Err, len(h.Requests("tasks/get")) > gets, res.Task.WaitsForInput(), res.Task.PendingAnswers)
	}
	h.On("tasks/update", nil)
	if _, err := e.tracker.Answer(context.Background(), rec.ID, map[string]json.RawMessage{key: approveYes}); err != nil {
		t.Fatalf("answering again: %v", err)
	}
	seen := e.watch(rec.ID, ended)
	if got := seen[len(seen)-1]; got.Status != model.StatusCompleted {
		t.Fatalf("after answering again: %s", got.Status)
	}
}

// A server of an older protocol does not know server/discover (-32601) and
// answers initialize: one of 2025-11-25 is spoken to in its revision; an
// older one is told apart from one that failed, by name.
func TestOlderServerIsNamedByItsVersion(t *testing.T) {
	e, h := newHostileEnv(t)
	h.On("server/discover", hostile.Error(-32601, "Method not found"))
	s, err := e.pool.Session(context.Background(), e.ref)
	if err != nil || s.Protocol != "2025-11-25" {
		t.Fatalf("connecting to a 2025-11-25 server: %v; want a 2025-11-25 session", err)
	}
	e.pool.Drop(s)
	h.On("initialize", func(w http.ResponseWriter, req *hostile.Request) bool {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-06-18","capabilities":{},"serverInfo":{"name":"old","version":"1"}}}`, req.ID)
		return true
	})
	_, err = e.pool.Session(context.Background(), e.ref)
	if err == nil || !strings.Contains(err.Error(), "speaks 2025-06-18; taskdeck needs MCP 2026-07-28") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("connecting to an older server: %v; want one line saying which protocols taskdeck needs", err)
	}
}

// A poll its caller cuts off (an agent that hung up on the proxy while its
// tasks/get waited for the server) is no failed poll: the task shows no
// error and keeps its schedule.
func TestPollCutOffByItsCallerIsNoFailure(t *testing.T) {
	e, h := newHostileEnv(t)
	rec, _, err := tupled(e.tracker.Call(context.Background(), callRequest{Server: e.ref, Tool: "sleep", Args: json.RawMessage(`{"seconds":60}`)}))
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	defer close(release)
	h.On("tasks/get", hostile.Stall(release))
	// The server never answers: the caller's deadline cuts the poll off.
	ctx, cancel := context.WithTimeout(context.Background(), waitfor.Scale(200*time.Millisecond))
	defer cancel()
	if _, err := e.tracker.Poll(ctx, rec.ID); !errors.Is(err, context.DeadlineExceeded) || len(h.Requests("tasks/get")) == 0 {
		t.Fatalf("a poll cut off by its caller: %v after %d tasks/get, want the deadline after one", err, len(h.Requests("tasks/get")))
	}
	if ps := e.tracker.pollStatus(rec.ID); ps.Errors != 0 || ps.LastError != nil {
		t.Fatalf("a poll cut off by its caller counted as failed: %d errors, %v", ps.Errors, ps.LastError)
	}
}
