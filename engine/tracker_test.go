package engine

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/internal/hostile"

	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/internal/pgtest"
	"github.com/taskdeck/taskdeck/internal/waitfor"
	"github.com/taskdeck/taskdeck/mcpclient"
	mcpconfig "github.com/taskdeck/taskdeck/mcpclient/config"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store"
	"github.com/taskdeck/taskdeck/store/badger"
)

func TestMain(m *testing.M) {
	hostile.ServeStdioChild()
	// One TestMain for the package's tests: the fleet's
	// need a real PostgreSQL.
	os.Exit(pgtest.Run(m))
}

// trackerPolicy keeps the tests quick; the demo server's hint is 20 ms.
var trackerPolicy = model.PollPolicy{Default: 20 * time.Millisecond, Floor: 10 * time.Millisecond, Cap: 200 * time.Millisecond, Growth: 1.6, Jitter: 0.1}

type env struct {
	t       *testing.T
	demo    *demo.Server
	http    *httptest.Server
	store   *badger.Store
	pool    *mcpclient.Pool
	tracker *tracker
	ref     model.ServerRef
}

// newEnv runs a demo server on loopback HTTP and a tracker over a real
// store in a temp dir, with the server configured as "demo" (HTTP) and
// "stdio" (this test binary as a child process).
func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{t: t, ref: model.ServerRef{Name: "demo"}}
	e.startServer("127.0.0.1:0")
	cfgJSON := fmt.Sprintf(`{"mcpServers": {
		"demo": {"url": %q},
		"stdio": {"command": %q, "args": ["-test.run=^$"], "env": {%q: "1"}}}}`,
		e.http.URL+"/mcp", os.Args[0], hostile.StdioChildEnv)
	cfg, err := mcpconfig.ParseConfig("test.json", []byte(cfgJSON))
	if err != nil {
		t.Fatal(err)
	}
	e.store, err = badger.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	e.pool = mcpclient.NewPool(mcpclient.PoolOptions{Config: cfg})
	e.tracker = newTracker(e.store, e.pool, trackerOptions{Policy: trackerPolicy, RequestTimeout: waitfor.Scale(5 * time.Second)})
	t.Cleanup(func() {
		e.pool.Close()
		e.store.Close()
		e.stopServer()
	})
	return e
}

func (e *env) startServer(addr string) {
	e.demo = demo.New(demo.Options{Speed: 0.05, PollInterval: 20 * time.Millisecond})
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		e.t.Fatal(err)
	}
	e.http = httptest.NewUnstartedServer(e.demo.Handler())
	e.http.Listener = ln
	e.http.Start()
}

func (e *env) stopServer() {
	if e.http != nil {
		e.http.Close()
		e.demo.Close()
		e.http = nil
	}
}

func (e *env) call(tool, args, key string) *model.Task {
	e.t.Helper()
	rec, _, err := tupled(e.tracker.Call(context.Background(), callRequest{Server: e.ref, Tool: tool, Args: json.RawMessage(args), Key: key}))
	if err != nil {
		e.t.Fatalf("call %s: %v", tool, err)
	}
	return rec
}

// watch polls a task until stop says so, returning every poll's record.
func (e *env) watch(id string, stop func(*model.Task) bool) []*model.Task {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitfor.Scale(20*time.Second))
	defer cancel()
	var seen []*model.Task
	err := follow(ctx, e.tracker, []string{id}, func(res pollResult) bool {
		if res.Err != nil {
			e.t.Logf("poll error: %v", res.Err)
		}
		seen = append(seen, res.Task)
		return !stop(res.Task)
	})
	if err != nil {
		e.t.Fatalf("watch: %v", err)
	}
	if len(seen) == 0 {
		e.t.Fatal("watch polled nothing")
	}
	return seen
}

// follow polls each task when its last poll says, until it has ended or
// onPoll lets it go: the engine's loop does this for the program; these
// tests drive the tracker alone.
func follow(ctx context.Context, tr *tracker, ids []string, onPoll func(pollResult) (keep bool)) error {
	var mu sync.Mutex
	var first error
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Go(func() {
			if err := followOne(ctx, tr, id, onPoll); err != nil {
				mu.Lock()
				first = cmp.Or(first, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return first
}

func followOne(ctx context.Context, tr *tracker, id string, onPoll func(pollResult) bool) error {
	for {
		res, err := tr.Poll(ctx, id)
		if err != nil {
			return err
		}
		if !onPoll(res) || res.Next <= 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(res.Next):
		}
	}
}

func ended(t *model.Task) bool         { return t.Status.Terminal() }
func waitsForInput(t *model.Task) bool { return t.Status == model.StatusInputRequired }

func resultText(t *testing.T, rec *model.Task) string {
	t.Helper()
	var res struct {
		Content []struct{ Text string } `json:"content"`
	}
	if err := json.Unmarshal(rec.Result, &res); err != nil || len(res.Content) == 0 {
		t.Fatalf("result %s: %v", rec.Result, err)
	}
	return res.Content[0].Text
}

func TestEchoIsADirectResult(t *testing.T) {
	e := newEnv(t)
	rec := e.call("echo", `{"text":"hello"}`, "")
	if rec.Status != model.StatusCompleted || rec.TaskID != "" {
		t.Fatalf("echo: status %s taskId %q, want completed with no task", rec.Status, rec.TaskID)
	}
	if got := resultText(t, rec); got != "hello" {
		t.Fatalf("echo result %q", got)
	}
	if n := e.demo.Stats().TasksCreated; n != 0 {
		t.Fatalf("server created %d tasks for echo", n)
	}
}

func TestSleepRunsToCompletionWithProgress(t *testing.T) {
	e := newEnv(t)
	rec := e.call("sleep", `{"seconds":3}`, "")
	// Invariant 1: the handle is on disk when Call returns.
	stored, err := e.store.Get(rec.ID)
	if err != nil || stored.TaskID == "" || stored.Status != model.StatusWorking {
		t.Fatalf("after Call the store has %+v (%v), want a working record with its handle", stored, err)
	}
	if ids := e.demo.Stats().TaskIDs; len(ids) != 1 || ids[0] != stored.TaskID {
		t.Fatalf("stored handle %q, server created %v", stored.TaskID, ids)
	}
	seen := e.watch(rec.ID, ended)
	final := seen[len(seen)-1]
	if final.Status != model.StatusCompleted || final.IsError {
		t.Fatalf("final status %s isError %v", final.Status, final.IsError)
	}
	if got := resultText(t, final); got != "slept 3 s" {
		t.Fatalf("result %q", got)
	}
	progress := map[string]bool{}
	for _, r := range seen {
		if strings.HasPrefix(r.StatusMessage, "slept") {
			progress[r.StatusMessage] = true
		}
	}
	if len(progress) < 2 {
		t.Fatalf("saw progress messages %v, want several", progress)
	}
}

func TestApproveAnsweredThroughUpdate(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	rec := e.call("approve", `{"action":"deploy"}`, "")
	seen := e.watch(rec.ID, waitsForInput)
	rec = seen[len(seen)-1]
	keys := rec.PendingInputs()
	if len(keys) != 1 {
		t.Fatalf("pending inputs %v", keys)
	}
	key := keys[0]
	updates := e.demo.Stats().Updates

	// Wrong answers are refused before anything is sent.
	for _, bad := range []string{
		`{"action":"accept","content":{"approve":"yes","reason":"x"}}`,
		`{"action":"accept","content":{"approve":true}}`,
		`{"action":"maybe"}`,
	} {
		if _, err := e.tracker.Answer(ctx, rec.ID, map[string]json.RawMessage{key: json.RawMessage(bad)}); err == nil {
			t.Errorf("answer %s was accepted", bad)
		}
	}
	var keyErr *inputKeyError
	if _, err := e.tracker.Answer(ctx, rec.ID, map[string]json.RawMessage{"nope": json.RawMessage(`{"action":"decline"}`)}); !errors.As(err, &keyErr) {
		t.Errorf("answer for an unasked key: %v", err)
	}
	if got := e.demo.Stats().Updates; got != updates {
		t.Fatalf("bad answers reached the server (%d updates)", got-updates)
	}

	good := json.RawMessage(`{"action":"accept","content":{"approve":true,"reason":"tests pass"}}`)
	if _, err := e.tracker.Answer(ctx, rec.ID, map[string]json.RawMessage{key: good}); err != nil {
		t.Fatal(err)
	}
	// Invariant 5: a key is answered once.
	if _, err := e.tracker.Answer(ctx, rec.ID, map[string]json.RawMessage{key: good}); !errors.As(err, &keyErr) && err == nil {
		t.Fatal("the same key was answered twice")
	}
	seen = e.watch(rec.ID, ended)
	final := seen[len(seen)-1]
	if final.Status != model.StatusCompleted || resultText(t, final) != "approved deploy: tests pass" {
		t.Fatalf("final %s %s", final.Status, final.Result)
	}
	if len(final.PendingAnswers) != 0 || !final.Answered(key) {
		t.Fatalf("answer bookkeeping: pending %v answered %v", final.PendingAnswers, final.AnsweredKeys)
	}
}

func TestCancelSleep(t *testing.T) {
	e := newEnv(t)
	rec := e.call("sleep", `{"seconds":60}`, "")
	rec, err := e.tracker.Cancel(context.Background(), rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !rec.CancelRequested {
		t.Fatal("cancel-requested not recorded")
	}
	seen := e.watch(rec.ID, ended)
	if final := seen[len(seen)-1]; final.Status != model.StatusCancelled {
		t.Fatalf("after cancel: %s", final.Status)
	}
	if e.demo.Stats().Cancels != 1 {
		t.Fatalf("server saw %d cancels", e.demo.Stats().Cancels)
	}
	if _, err := e.tracker.Cancel(context.Background(), rec.ID); err == nil {
		t.Fatal("cancelling an ended task should say it has ended")
	}
}

// A change to the record that lands while a poll is on the wire (here the
// operator's cancel) wins: the poll whose answer can no longer apply
// reports the record as stored, and polling stops with it.
func TestPollAnswerAfterALocalChangeReportsTheStoredRecord(t *testing.T) {
	e := newEnv(t)
	var change atomic.Pointer[func()]
	hooked := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Method") == "tasks/get" {
			if f := change.Swap(nil); f != nil {
				(*f)()
			}
		}
		e.demo.Handler().ServeHTTP(w, r)
	}))
	defer hooked.Close()
	rec, _, err := tupled(e.tracker.Call(context.Background(), callRequest{Server: model.ServerRef{URL: hooked.URL + "/mcp"}, Tool: "sleep", Args: json.RawMessage(`{"seconds":600}`)}))
	if err != nil {
		t.Fatal(err)
	}
	// Wait for the demo's progress message to move on, so that the answer
	// changes the record; asked past the tracker, the store stays as it is.
	sess, err := e.pool.Session(context.Background(), e.ref)
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the progress message to move on from "+rec.StatusMessage, func() bool {
		snap, err := sess.GetTask(context.Background(), rec.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		return snap.StatusMessage != rec.StatusMessage
	})
	cancel := func() {
		if _, err := e.store.Update(rec.ID, func(r *model.Task) (bool, error) {
			return true, r.MoveTo(model.StatusCancelled, "cancelled here", time.Now())
		}); err != nil {
			t.Error(err)
		}
	}
	change.Store(&cancel)
	res, err := e.tracker.Poll(context.Background(), rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	if change.Load() != nil {
		t.Fatal("the poll never reached the server")
	}
	if res.Err == nil || res.Task.Status != model.StatusCancelled || res.Next != 0 {
		t.Fatalf("poll after a local cancel: status %s, next %v, err %v; want the stored cancelled record, no next poll, and the refused answer as the error", res.Task.Status, res.Next, res.Err)
	}
}

func TestFailModes(t *testing.T) {
	e := newEnv(t)
	rec := e.call("fail", `{"mode":"error"}`, "")
	final := e.watch(rec.ID, ended)
	last := final[len(final)-1]
	if last.Status != model.StatusFailed || last.Error == nil || last.Error.Code != -32603 {
		t.Fatalf("fail error: %s %+v", last.Status, last.Error)
	}
	rec = e.call("fail", `{"mode":"tool"}`, "")
	final = e.watch(rec.ID, ended)
	last = final[len(final)-1]
	if last.Status != model.StatusCompleted || !last.IsError {
		t.Fatalf("fail tool: %s isError %v", last.Status, last.IsError)
	}
}

func TestIdempotencyKeyLaunchesOnce(t *testing.T) {
	e := newEnv(t)
	first := e.call("sleep", `{"seconds":60}`, "k1")
	again, reused, err := tupled(e.tracker.Call(context.Background(), callRequest{
		Server: e.ref, Tool: "sleep", Args: json.RawMessage(`{ "seconds" : 60 }`), Key: "k1"}))
	if err != nil || !reused || again.ID != first.ID {
		t.Fatalf("second call with the same key: %v reused=%v id %s vs %s", err, reused, again.ID, first.ID)
	}
	var conflict *keyConflictError
	_, _, err = tupled(e.tracker.Call(context.Background(), callRequest{Server: e.ref, Tool: "sleep", Args: json.RawMessage(`{"seconds":5}`), Key: "k1"}))
	if !errors.As(err, &conflict) {
		t.Fatalf("same key, other arguments: %v", err)
	}

	// Concurrent launches with one key: one server task, and every call
	// answered with its record, the race's losers as reused.
	var wg sync.WaitGroup
	ids := make(chan string, 8)
	var reusedN atomic.Int32
	begin := make(chan struct{}) // all at once, so that some lose the race to Create
	for range 8 {
		wg.Go(func() {
			<-begin
			rec, reused, err := tupled(e.tracker.Call(context.Background(), callRequest{Server: e.ref, Tool: "sleep", Args: json.RawMessage(`{"seconds":60}`), Key: "k2"}))
			if err != nil {
				t.Errorf("concurrent call with one key: %v", err)
				return
			}
			ids <- rec.ID
			if reused {
				reusedN.Add(1)
			}
		})
	}
	close(begin)
	wg.Wait()
	close(ids)
	distinct := map[string]bool{}
	for id := range ids {
		distinct[id] = true
	}
	if len(distinct) != 1 || reusedN.Load() != 7 {
		t.Fatalf("key k2 named %d tasks, %d of 8 calls reused it; want 1 and 7", len(distinct), reusedN.Load())
	}
	if got := e.demo.Stats().ToolCalls["sleep"]; got != 2 {
		t.Fatalf("server received %d sleep calls for two keys", got)
	}
}

func TestRestartedServerMakesTaskUnknown(t *testing.T) {
	e := newEnv(t)
	rec := e.call("sleep", `{"seconds":60}`, "")
	addr := e.http.Listener.Addr().String()
	e.stopServer()
	// Unreachable: the error is shown, the task keeps its state, backoff grows.
	res, err := e.tracker.Poll(context.Background(), rec.ID)
	if err != nil || res.Err == nil || res.Task.Status != model.StatusWorking {
		t.Fatalf("poll of a down server: %v %+v", err, res)
	}
	var te *mcpclient.TransportError
	if !errors.As(res.Err, &te) {
		t.Fatalf("poll error %T %v, want a transport error", res.Err, res.Err)
	}
	e.startServer(addr) // same address, empty task table
	res, err = e.tracker.Poll(context.Background(), rec.ID)
	if err != nil || res.Task.Status != model.StatusUnknown || res.Next != 0 {
		t.Fatalf("poll after restart: %v status %s next %s", err, res.Task.Status, res.Next)
	}
	gets := e.demo.Stats().Gets
	res, _ = e.tracker.Poll(context.Background(), rec.ID)
	if res.Next != 0 || e.demo.Stats().Gets != gets {
		t.Fatal("an unknown task was polled again")
	}
}

// The engine's Open runs OrphanStale (its reconcile's one-poll-per-task
// part is TestReconcileTwoThousand).
func TestStaleIntentsBecomeOrphans(t *testing.T) {
	e := newEnv(t)
	open := e.call("sleep", `{"seconds":60}`, "")
	// A crash between intent and handle leaves exactly this behind.
	stale := model.NewIntent(e.ref, "sleep", json.RawMessage(`{"seconds":9}`), "k-stale", time.Now())
	if err := e.store.Create(stale); err != nil {
		t.Fatal(err)
	}
	orphans, err := e.tracker.OrphanStale()
	if err != nil {
		t.Fatal(err)
	}
	if len(orphans) != 1 || orphans[0].ID != stale.ID || orphans[0].Status != model.StatusOrphaned {
		t.Fatalf("orphaned %v", orphans)
	}
	// The orphaning is the engine's act, named on the record and its move.
	if act, last := orphans[0].Act, orphans[0].History[len(orphans[0].History)-1]; act == nil || act.Kind != model.ActOrphan ||
		act.Actor.Role != model.RoleEngine || last.By != act.Actor {
		t.Fatalf("the orphaning's act %+v, its move by %+v; want the engine's orphan", act, last.By)
	}
	if got := e.stored(open.ID); got.Status != model.StatusWorking {
		t.Fatalf("a task with its handle is %s after OrphanStale, want working", got.Status)
	}
	// The orphan holds its key: nothing is silently re-sent.
	calls := e.demo.Stats().ToolCalls["sleep"]
	rec, reused, err := tupled(e.tracker.Call(context.Background(), callRequest{Server: e.ref, Tool: "sleep", Args: json.RawMessage(`{"seconds":9}`), Key: "k-stale"}))
	if err != nil || !reused || rec.ID != stale.ID || e.demo.Stats().ToolCalls["sleep"] != calls {
		t.Fatalf("orphan's key re-sent the call: %v reused=%v", err, reused)
	}
}

func TestUnreachableServerWritesNothing(t *testing.T) {
	e := newEnv(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String() + "/mcp"
	ln.Close()
	_, _, err = tupled(e.tracker.Call(context.Background(), callRequest{Server: model.ServerRef{URL: url}, Tool: "sleep", Key: "k"}))
	var te *mcpclient.TransportError
	if !errors.As(err, &te) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("call to a closed port: %T %v", err, err)
	}
	if all, _ := e.store.All(); len(all) != 0 {
		t.Fatalf("a call that never left wrote %d records", len(all))
	}
}

func TestServerRefusalFailsTheIntentAndFreesTheKey(t *testing.T) {
	// The call fits the tool list; the server refuses it all the same.
	e, h := newHostileEnv(t)
	h.On("tools/call", hostile.Error(-32602, "invalid params"))
	refused := callRequest{Server: e.ref, Tool: "sleep", Args: json.RawMessage(`{"seconds":1}`), Key: "k"}
	_, _, err := tupled(e.tracker.Call(context.Background(), refused))
	var se *mcpclient.ServerError
	if !errors.As(err, &se) {
		t.Fatalf("a refused call: %v; want the server's refusal", err)
	}
	all, _ := e.store.All()
	if len(all) != 1 || all[0].Status != model.StatusFailed {
		t.Fatalf("refused call left %v", all)
	}
	// The same call again reaches the server (and is refused again).
	if _, _, err := tupled(e.tracker.Call(context.Background(), refused)); !errors.As(err, &se) {
		t.Fatalf("the refused call retried under its key: %v; want the server's refusal again", err)
	}
	// The corrected call under the same key is made.
	h.On("tools/call", nil)
	rec, reused, err := tupled(e.tracker.Call(context.Background(), callRequest{Server: e.ref, Tool: "sleep", Args: json.RawMessage(`{"seconds":60}`), Key: "k"}))
	if err != nil || reused || rec.Status != model.StatusWorking {
		t.Fatalf("the corrected call under the refused call's key: %v reused=%v %+v", err, reused, rec)
	}
	if byKey, err := e.store.ByKey("k"); err != nil || byKey.ID != rec.ID {
		t.Fatalf("key k names %v (%v), want the corrected call", byKey, err)
	}
	// The refusals stay on record, without the key.
	all, _ = e.store.All()
	failed := 0
	for _, r := range all {
		if r.Status == model.StatusFailed && r.IdempotencyKey == "" && string(r.Arguments) == `{"seconds":1}` {
			failed++
		}
	}
	if len(all) != 3 || failed != 2 {
		t.Fatalf("after two refusals and a call: %d records, %d refusals without a key", len(all), failed)
	}
}

func TestStdioFullCycle(t *testing.T) {
	e := newEnv(t)
	e.ref = model.ServerRef{Name: "stdio"}
	rec := e.call("sleep", `{"seconds":2}`, "")
	seen := e.watch(rec.ID, ended)
	if final := seen[len(seen)-1]; final.Status != model.StatusCompleted {
		t.Fatalf("stdio sleep: %s", final.Status)
	}
	rec = e.call("approve", `{"action":"ship"}`, "")
	seen = e.watch(rec.ID, waitsForInput)
	key := seen[len(seen)-1].PendingInputs()[0]
	if _, err := e.tracker.Answer(context.Background(), rec.ID, map[string]json.RawMessage{
		key: json.RawMessage(`{"action":"accept","content":{"approve":false,"reason":"not today"}}`)}); err != nil {
		t.Fatal(err)
	}
	seen = e.watch(rec.ID, ended)
	if got := resultText(t, seen[len(seen)-1]); got != "rejected ship: not today" {
		t.Fatalf("stdio approve result %q", got)
	}
	rec = e.call("sleep", `{"seconds":60}`, "")
	if _, err := e.tracker.Cancel(context.Background(), rec.ID); err != nil {
		t.Fatal(err)
	}
	seen = e.watch(rec.ID, ended)
	if final := seen[len(seen)-1]; final.Status != model.StatusCancelled {
		t.Fatalf("stdio cancel: %s", final.Status)
	}
}

func TestMcpNameHeaderCarriesTaskID(t *testing.T) {
	e := newEnv(t)
	var mu sync.Mutex
	names := map[string]string{}
	// A recording hop in front of the real server.
	inner := e.http.Config.Handler
	e.http.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		names[r.Header.Get("Mcp-Method")] = r.Header.Get("Mcp-Name")
		mu.Unlock()
		inner.ServeHTTP(w, r)
	})
	rec := e.call("sleep", `{"seconds":1}`, "")
	e.watch(rec.ID, ended)
	mu.Lock()
	defer mu.Unlock()
	stored, _ := e.store.Get(rec.ID)
	if names["tasks/get"] != stored.TaskID || names["tools/call"] != "sleep" {
		t.Fatalf("headers %v, task %s", names, stored.TaskID)
	}
}

// A pushed state goes through the poll's path: the same state writes
// nothing (the revision stays), a new one is written once, one about
// another task or a step back is refused, and a forgotten record is not
// made again.
func TestPushedAppliesAsAPoll(t *testing.T) {
	e := newEnv(t)
	rec := e.call("approve", `{"action":"a"}`, "") // waits for input: it moves only when told
	res, err := e.tracker.Poll(context.Background(), rec.ID)
	if err != nil || res.Err != nil {
		t.Fatal(err, res.Err)
	}
	now := res.Task
	same := model.Snapshot{TaskID: now.TaskID, Status: now.Status, StatusMessage: now.StatusMessage,
		CreatedAt: now.ServerCreatedAt, TTLMs: now.TTLMs, PollIntervalMs: now.PollIntervalMs, InputRequests: now.InputRequests}
	got, err := e.tracker.Pushed(rec.ID, same)
	if err != nil || got.Changed || got.Task.Revision != now.Revision {
		t.Fatalf("the same state pushed: changed %v, revision %d (was %d), err %v", got.Changed, got.Task.Revision, now.Revision, err)
	}
	done := same
	done.Status, done.StatusMessage, done.InputRequests = model.StatusCompleted, "done", nil
	done.Result = json.RawMessage(`{"content":[]}`)
	got, err = e.tracker.Pushed(rec.ID, done)
	if err != nil || !got.Changed || got.Task.Status != model.StatusCompleted || got.Next != 0 {
		t.Fatalf("the end pushed: %+v, err %v", got, err)
	}
	back := same
	if got, err = e.tracker.Pushed(rec.ID, back); err != nil || got.Task.Status != model.StatusCompleted || got.Changed {
		t.Fatalf("a step back after the end: %+v, err %v", got, err)
	}
	if err := e.tracker.Forget(context.Background(), rec.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.tracker.Pushed(rec.ID, done); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a push for a forgotten record: %v, want store.ErrNotFound", err)
	}
	if _, err := e.store.Get(rec.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatal("the forgotten record is back")
	}
}

// tupled is a call's outcome as these tests check it: the record, whether
// the key reused it, the error.
func tupled(out callOutcome, err error) (*model.Task, bool, error) {
	return out.Task, out.Reused, err
}
