package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/internal/waitfor"

	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/internal/hostile"
	"github.com/taskdeck/taskdeck/mcpclient"
	mcpconfig "github.com/taskdeck/taskdeck/mcpclient/config"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store/badger"
)

// secretEnv is a tracker over a real store and the hostile front of a
// real demo server, configured as "web" with a secret in its URL's query
// and in its headers (both through ${TD_TOKEN}).
type secretEnv struct {
	t       *testing.T
	srv     *hostile.Server
	cfg     *mcpconfig.Config
	store   *badger.Store
	secret  string
	timeout time.Duration
	ref     model.ServerRef
}

func newSecretEnv(t *testing.T, opts demo.Options) *secretEnv {
	t.Helper()
	if opts.Speed == 0 {
		opts.Speed = 0.05
	}
	if opts.PollInterval == 0 {
		opts.PollInterval = 20 * time.Millisecond
	}
	e := &secretEnv{t: t, srv: hostile.Start(t, opts), secret: "tdsecret-" + fmt.Sprint(time.Now().UnixNano()),
		timeout: waitfor.Scale(5 * time.Second), ref: model.ServerRef{Name: "web"}}
	cfg, err := mcpconfig.ParseConfig("test.json", []byte(fmt.Sprintf(`{"mcpServers":{"web":{"url":%q,
		"headers":{"Authorization":"Bearer ${TD_TOKEN}","X-Api-Key":"${TD_TOKEN}"}}}}`, e.srv.URL+"?token=${TD_TOKEN}")))
	if err != nil {
		t.Fatal(err)
	}
	e.cfg = cfg
	if e.store, err = badger.Open(t.TempDir(), nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.store.Close() })
	return e
}

// pool is a new pool on the env's config; it is closed when the test ends.
func (e *secretEnv) pool() *mcpclient.Pool {
	p := mcpclient.NewPool(mcpclient.PoolOptions{Config: e.cfg, RequestTimeout: e.timeout, Lookup: func(k string) (string, bool) {
		if k == "TD_TOKEN" {
			return e.secret, true
		}
		return "", false
	}})
	e.t.Cleanup(p.Close)
	return p
}

func (e *secretEnv) tracker(p *mcpclient.Pool) *tracker {
	return newTracker(e.store, p, trackerOptions{Policy: trackerPolicy, RequestTimeout: e.timeout})
}

// oneLineNaming fails unless err is one line that names the server and
// holds every part, and holds no secret.
func (e *secretEnv) oneLineNaming(err error, parts ...string) string {
	e.t.Helper()
	if err == nil {
		e.t.Fatalf("no error; want one naming %v", parts)
	}
	msg := err.Error()
	if strings.ContainsAny(msg, "\n\r") {
		e.t.Errorf("the error is more than one line: %q", msg)
	}
	for _, p := range append([]string{"server web"}, parts...) {
		if !strings.Contains(msg, p) {
			e.t.Errorf("the error does not say %q: %s", p, msg)
		}
	}
	if strings.Contains(msg, e.secret) {
		e.t.Errorf("the error holds the secret: %s", msg)
	}
	return msg
}

// TestRedirectsAreRefused: a redirect in answer to server/discover,
// tools/call or tasks/get is not followed, so the configured headers
// never reach the other host; the error is one line naming the server and
// the target (its query redacted); a redirected tools/call started
// nothing, so its record fails without a handle; a redirected
// tasks/get leaves the task as it was.
func TestRedirectsAreRefused(t *testing.T) {
	e := newSecretEnv(t, demo.Options{})
	target := hostile.StartRecorder(t)
	targetSecret := "sig-" + e.secret
	to := target.URL + "/mcp?sig=" + targetSecret
	check := func(t *testing.T, err error) {
		t.Helper()
		msg := e.oneLineNaming(err, "redirect", target.URL+"/mcp")
		if strings.Contains(msg, targetSecret) {
			t.Errorf("the error holds the target's query: %s", msg)
		}
		if got := target.Received(); len(got) > 0 {
			t.Fatalf("the redirect target received %d requests, the first %s with headers %v", len(got), got[0].URL, got[0].Header)
		}
	}
	for _, code := range []int{307, 308, 302} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			e.t = t
			// server/discover: nothing is connected, nothing is written.
			e.srv.On("server/discover", hostile.Redirect(code, to))
			before, err := e.store.All()
			if err != nil {
				t.Fatal(err)
			}
			_, _, err = tupled(e.tracker(e.pool()).Call(context.Background(), callRequest{Server: e.ref, Tool: "echo", Args: json.RawMessage(`{"text":"x"}`)}))
			check(t, err)
			if after, _ := e.store.All(); len(after) != len(before) {
				t.Errorf("a call whose connect was redirected wrote %d records", len(after)-len(before))
			}
			e.srv.On("server/discover", nil)

			// tools/call: the server answered, with a redirect: no task.
			tr := e.tracker(e.pool())
			key := fmt.Sprintf("key-%d", code)
			e.srv.On("tools/call", hostile.Redirect(code, to))
			rec, _, err := tupled(tr.Call(context.Background(), callRequest{Server: e.ref, Tool: "sleep", Args: json.RawMessage(`{"seconds":600}`), Key: key}))
			check(t, err)
			if rec == nil || rec.Status != model.StatusFailed || rec.TaskID != "" {
				t.Fatalf("a redirected tools/call left %+v; want a failed record without a handle", rec)
			}
			e.srv.On("tools/call", nil)
			again, _, err := tupled(tr.Call(context.Background(), callRequest{Server: e.ref, Tool: "sleep", Args: json.RawMessage(`{"seconds":600}`)}))
			if err != nil || again.TaskID == "" {
				t.Fatalf("a call after the redirect: %+v, %v; want a new task", again, err)
			}

			// tasks/get: the task keeps its state.
			e.srv.On("tasks/get", hostile.Redirect(code, to))
			res, err := tr.Poll(context.Background(), again.ID)
			if err != nil {
				t.Fatal(err)
			}
			check(t, res.Err)
			stored, err := e.store.Get(again.ID)
			if err != nil {
				t.Fatal(err)
			}
			if stored.Status != model.StatusWorking {
				t.Fatalf("after a redirected tasks/get the task is %s; want working", stored.Status)
			}
			e.srv.On("tasks/get", nil)
		})
	}
}

// TestAnswersAreBounded: an answer past the bound, plain or a gzip bomb,
// to any request taskdeck sends ends that request with a one-line error,
// and reading it allocates a small multiple of the bound, not the
// answer's size.
func TestAnswersAreBounded(t *testing.T) {
	e := newSecretEnv(t, demo.Options{JSONResponse: true})
	const bound = 16 << 20
	ctx := context.Background()
	// A task of each kind the task methods need, made on a healthy path.
	sess, err := e.pool().Session(ctx, e.ref)
	if err != nil {
		t.Fatal(err)
	}
	taskOf := func(tool, args string) string {
		out, err := sess.CallTool(ctx, tool, json.RawMessage(args), nil, "")
		if err != nil || out.Task == nil {
			t.Fatalf("%s: %v %+v", tool, err, out)
		}
		return out.Task.TaskID
	}
	approve := taskOf("approve", `{"action":"x"}`)
	waitUntil(t, "approve to ask for input", func() bool {
		snap, err := sess.GetTask(ctx, approve)
		return err == nil && snap.Status == model.StatusInputRequired
	})
	answer := map[string]json.RawMessage{"approve-1": json.RawMessage(`{"action":"accept","content":{"approve":true,"reason":"ok"}}`)}
	ops := []struct {
		method string
		do     func(*mcpclient.Session) error
	}{
		{"server/discover", nil},
		{"tools/list", func(s *mcpclient.Session) error { _, err := s.ListTools(ctx); return err }},
		{"tools/call", func(s *mcpclient.Session) error {
			_, err := s.CallTool(ctx, "echo", json.RawMessage(`{"text":"x"}`), nil, "")
			return err
		}},
		{"tasks/get", func(s *mcpclient.Session) error { _, err := s.GetTask(ctx, approve); return err }},
		{"tasks/update", func(s *mcpclient.Session) error { return s.UpdateTask(ctx, approve, answer) }},
		{"tasks/cancel", func(s *mcpclient.Session) error { return s.CancelTask(ctx, taskOf("sleep", `{"seconds":600}`)) }},
	}
	faults := []struct {
		name  string
		fault hostile.Fault
	}{
		{"gzip bomb", e.srv.GzipBomb(16 * bound)},
		{"plain body", e.srv.HugeBody(4 * bound)},
	}
	for _, op := range ops {
		for _, f := range faults {
			pool := e.pool()
			var s *mcpclient.Session
			if op.do != nil {
				if s, err = pool.Session(ctx, e.ref); err != nil {
					t.Fatal(err)
				}
			}
			var m0, m1 runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&m0)
			e.srv.On(op.method, f.fault)
			if op.do == nil {
				_, err = pool.Session(ctx, e.ref)
			} else {
				err = op.do(s)
			}
			e.srv.On(op.method, nil)
			runtime.ReadMemStats(&m1)
			alloc := m1.TotalAlloc - m0.TotalAlloc
			t.Logf("%s, %s: %d MiB allocated: %v", op.method, f.name, alloc>>20, err)
			if err == nil {
				t.Errorf("%s answered with a %s: no error", op.method, f.name)
				continue
			}
			e.oneLineNaming(err, op.method, "larger than 16 MiB")
			if alloc > 6*bound {
				t.Errorf("%s answered with a %s: %d MiB allocated; want at most %d MiB", op.method, f.name, alloc>>20, 6*bound>>20)
			}
		}
	}
}

// TestStalledServerTimesOut: a server that takes the connection and never
// answers fails connect and tools/list within the request timeout, for
// every caller, with a one-line error naming the server; once it answers
// again, the next attempt succeeds.
func TestStalledServerTimesOut(t *testing.T) {
	e := newSecretEnv(t, demo.Options{})
	e.timeout = 500 * time.Millisecond
	until := make(chan struct{})
	t.Cleanup(func() { close(until) })
	pool := e.pool()
	// within runs f, failing the test if it has not returned well after
	// the timeout (without the fix it never does).
	within := func(what string, f func() error) error {
		t.Helper()
		start := time.Now()
		done := make(chan error, 1)
		go func() { done <- f() }()
		select {
		case err := <-done:
			if d := time.Since(start); d > 4*e.timeout {
				t.Errorf("%s took %s; the request timeout is %s", what, d, e.timeout)
			}
			return err
		case <-time.After(waitfor.Scale(20 * e.timeout)):
			t.Fatalf("%s still blocked after %s; the request timeout is %s", what, 20*e.timeout, e.timeout)
			return nil
		}
	}
	e.srv.On("*", hostile.Stall(until))
	// A call waits for the connect no longer than its own timeout, and
	// says the server did not answer (exit 3 on the command line).
	err := within("a call", func() error {
		_, _, err := tupled(e.tracker(pool).Call(context.Background(), callRequest{Server: e.ref, Tool: "echo"}))
		return err
	})
	var te *mcpclient.TransportError
	if !errors.As(err, &te) {
		t.Errorf("a call to a stalled server: %v; want a TransportError", err)
	}
	e.oneLineNaming(err, "server/discover")
	// Two callers of the same server: neither is held past the timeout.
	second := make(chan error, 1)
	go func() { _, err := pool.Session(context.Background(), e.ref); second <- err }()
	err = within("connect", func() error { _, err := pool.Session(context.Background(), e.ref); return err })
	e.oneLineNaming(err, "server/discover")
	e.oneLineNaming(within("the second connect", func() error { return <-second }), "server/discover")

	e.srv.On("*", nil)
	sess, err := pool.Session(context.Background(), e.ref)
	if err != nil {
		t.Fatalf("connect after the server recovered: %v", err)
	}
	e.srv.On("tools/list", hostile.Stall(until))
	err = within("tools/list", func() error { _, err := sess.ListTools(context.Background()); return err })
	e.oneLineNaming(err, "deadline exceeded")
	e.srv.On("tools/list", nil)
	tools, err := sess.ListTools(context.Background())
	if err != nil || len(tools) == 0 {
		t.Fatalf("tools/list after the server recovered: %d tools, %v", len(tools), err)
	}
}

// TestRequestIDsAreOneSequence: the direct tasks/get requests of a
// process are numbered in one sequence whose ids go-sdk never uses (it
// numbers each connection's requests from 1), across sessions too.
func TestRequestIDsAreOneSequence(t *testing.T) {
	e := newSecretEnv(t, demo.Options{})
	for range 2 { // a second pool is a second session in the same process
		tr := e.tracker(e.pool())
		rec, _, err := tupled(tr.Call(context.Background(), callRequest{Server: e.ref, Tool: "sleep", Args: json.RawMessage(`{"seconds":600}`)}))
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if res, err := tr.Poll(context.Background(), rec.ID); err != nil || res.Err != nil {
				t.Fatal(err, res.Err)
			}
		}
	}
	gets := map[string]bool{}
	for _, r := range e.srv.Requests("tasks/get") {
		if gets[string(r.ID)] {
			t.Fatalf("two tasks/get carried id %s", r.ID)
		}
		gets[string(r.ID)] = true
	}
	if len(gets) != 6 {
		t.Fatalf("%d tasks/get seen, want 6", len(gets))
	}
	for _, r := range e.srv.Requests("") {
		if r.Method != "tasks/get" && gets[string(r.ID)] {
			t.Fatalf("id %s was sent with %s and with tasks/get", r.ID, r.Method)
		}
	}
}

// TestConnectErrorSaysWhatFailed: a server that is down is reported in
// this protocol's words: server/discover, not go-sdk's fallback
// "initialize".
func TestConnectErrorSaysWhatFailed(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	e := newSecretEnv(t, demo.Options{})
	cfg, err := mcpconfig.ParseConfig("test.json", []byte(fmt.Sprintf(`{"mcpServers":{"web":{"url":"http://%s/mcp?token=${TD_TOKEN}"}}}`, addr)))
	if err != nil {
		t.Fatal(err)
	}
	e.cfg = cfg
	_, err = e.pool().Session(context.Background(), e.ref)
	msg := e.oneLineNaming(err, "unreachable", "server/discover", "connection refused")
	for _, noise := range []string{"initialize", "calling", "rejected by transport"} {
		if strings.Contains(msg, noise) {
			t.Errorf("the error says %q: %s", noise, msg)
		}
	}
}

// waitUntil checks cond until it holds, failing the test after 10 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	waitfor.Within(t, 10*time.Second, what, cond)
}
