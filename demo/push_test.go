package demo

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/internal/waitfor"
)

// A listen stream read by hand: every JSON-RPC message it carries, in
// order, and its end.
type stream struct {
	t      *testing.T
	id     string // the listen request's id, as JSON
	msgs   chan map[string]any
	peeked map[string]any
	cancel func()
}

// listenBody is a subscriptions/listen request for ids.
func (c *client) listenBody(ids []string) (string, []byte) {
	c.next++
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": c.next, "method": "subscriptions/listen",
		"params": map[string]any{"notifications": map[string]any{"taskIds": ids}, "_meta": c.meta()}})
	if err != nil {
		c.t.Fatal(err)
	}
	return fmt.Sprint(c.next), body
}

// listenHTTP opens a listen stream over HTTP; a status other than 200 fails.
func (e *env) listenHTTP(t *testing.T, c *client, ids ...string) *stream {
	t.Helper()
	id, body := c.listenBody(ids)
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.http.url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", protoVersion)
	req.Header.Set("Mcp-Method", "subscriptions/listen")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("listen: %s %s: %s", resp.Status, resp.Header.Get("Content-Type"), b)
	}
	s := &stream{t: t, id: id, msgs: make(chan map[string]any, 64), cancel: cancel}
	go func() {
		defer close(s.msgs)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data:"); ok {
				s.msgs <- decode(t, []byte(d))
			}
		}
	}()
	t.Cleanup(cancel)
	return s
}

func decode(t *testing.T, b []byte) map[string]any {
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Errorf("not JSON: %s", b)
	}
	return m
}

// next returns the next message; it fails if the stream ended.
func (s *stream) next() map[string]any {
	s.t.Helper()
	if m := s.peeked; m != nil {
		s.peeked = nil
		return m
	}
	select {
	case m, ok := <-s.msgs:
		if !ok {
			s.t.Fatal("the stream ended")
		}
		return m
	case <-time.After(waitfor.Scale(10 * time.Second)):
		s.t.Fatal("no message on the stream")
	}
	return nil
}

// peek returns the next message without taking it.
func (s *stream) peek() map[string]any {
	s.t.Helper()
	if s.peeked == nil {
		s.peeked = s.next()
	}
	return s.peeked
}

// ended checks that the stream carries nothing more.
func (s *stream) ended() {
	s.t.Helper()
	select {
	case m, ok := <-s.msgs:
		if ok {
			s.t.Fatalf("want the end of the stream, got %s", js(m))
		}
	case <-time.After(waitfor.Scale(10 * time.Second)):
		s.t.Fatal("the stream did not end")
	}
}

// subID checks a message's _meta subscriptionId names this stream.
func (s *stream) subID(where map[string]any) {
	s.t.Helper()
	meta, _ := where["_meta"].(map[string]any)
	if got := js(meta["io.modelcontextprotocol/subscriptionId"]); got != s.id {
		s.t.Fatalf("subscriptionId %s, want %s in %s", got, s.id, js(where))
	}
}

// acked reads the acknowledgement and returns its task ids.
func (s *stream) acked() []any {
	s.t.Helper()
	m := s.next()
	if m["method"] != "notifications/subscriptions/acknowledged" || m["id"] != nil {
		s.t.Fatalf("want the acknowledgement first, got %s", js(m))
	}
	p := m["params"].(map[string]any)
	s.subID(p)
	ids, _ := p["notifications"].(map[string]any)["taskIds"].([]any)
	return ids
}

// task reads a notifications/tasks and returns its params without _meta.
func (s *stream) task() map[string]any {
	s.t.Helper()
	m := s.next()
	if m["method"] != "notifications/tasks" || m["id"] != nil {
		s.t.Fatalf("want notifications/tasks, got %s", js(m))
	}
	p := maps.Clone(m["params"].(map[string]any))
	s.subID(p)
	delete(p, "_meta")
	return p
}

// end reads the graceful end: the listen request's result.
func (s *stream) end() {
	s.t.Helper()
	m := s.next()
	res, _ := m["result"].(map[string]any)
	if js(m["id"]) != s.id || res["resultType"] != "complete" {
		s.t.Fatalf("want the listen's result, got %s", js(m))
	}
	s.subID(res)
	s.ended()
}

// holdTask starts a hold task and waits until it takes steps.
func holdTask(t *testing.T, c *client, steps int) string {
	t.Helper()
	id := c.startTask(HoldTool, map[string]any{"steps": steps})
	until(t, "the hold task to wait", func() bool { return c.get(id)["statusMessage"] == fmt.Sprintf("step 0 of %d", steps) })
	return id
}

// step steps a hold task once its previous step is taken.
func step(t *testing.T, srv *Server, id string) {
	t.Helper()
	until(t, "a step", func() bool { return srv.Step(id) == nil })
}

// getView is tasks/get as a notification carries it (no resultType).
func getView(c *client, id string) map[string]any {
	v := maps.Clone(c.get(id))
	delete(v, "resultType")
	delete(v, "_meta")
	return v
}

// The stream acknowledges the two known ids only, sends the current state
// of each, then every change in order, each identical to tasks/get at
// that moment and stamped with the time OnChange reported, the terminal
// ones with their results, and ends gracefully once both have ended.
func TestPushTwoTasksAndAnUnknownID(t *testing.T) {
	e := newEnv(t, Options{Hold: true})
	var mu sync.Mutex
	changed := map[string][]string{} // task → lastUpdatedAt of each change, from OnChange
	e.srv.OnChange(func(id string, at time.Time) {
		mu.Lock()
		changed[id] = append(changed[id], at.UTC().Format(time.RFC3339Nano))
		mu.Unlock()
	})
	c := e.client(t, true)
	a, b := holdTask(t, c, 2), holdTask(t, c, 1)

	s := e.listenHTTP(t, c, a, "NOSUCHTASK", b)
	if got := js(s.acked()); got != js([]string{a, b}) {
		t.Fatalf("acknowledged %s, want %s", got, js([]string{a, b}))
	}
	for _, id := range []string{a, b} {
		if got, want := s.task(), getView(c, id); js(got) != js(want) {
			t.Fatalf("current state\n got %s\nwant %s", js(got), js(want))
		}
	}
	lastOf := func(id string) string {
		mu.Lock()
		defer mu.Unlock()
		return changed[id][len(changed[id])-1]
	}
	check := func(id, status, msg string) map[string]any {
		t.Helper()
		got := s.task()
		if got["taskId"] != id || got["status"] != status || got["statusMessage"] != msg {
			t.Fatalf("want %s %s %q, got %s", id[:6], status, msg, js(got))
		}
		if want := getView(c, id); js(got) != js(want) {
			t.Fatalf("notification differs from tasks/get\n got %s\nwant %s", js(got), js(want))
		}
		if got["lastUpdatedAt"] != lastOf(id) {
			t.Fatalf("lastUpdatedAt %v, OnChange said %v", got["lastUpdatedAt"], lastOf(id))
		}
		return got
	}
	step(t, e.srv, a)
	check(a, "working", "step 1 of 2")
	step(t, e.srv, b)
	if got := resultText(t, check(b, "completed", "step 0 of 1")["result"]); got != "held for 1 steps" {
		t.Fatalf("result %q", got)
	}
	step(t, e.srv, a)
	if got := resultText(t, check(a, "completed", "step 1 of 2")["result"]); got != "held for 2 steps" {
		t.Fatalf("result %q", got)
	}
	s.end()
	if n := e.srv.Stats().Subscriptions; n != 1 {
		t.Fatalf("Stats.Subscriptions %d", n)
	}
}

// Input requests, their answer, a failure and a cancel all reach the
// stream; a task that has already ended is acknowledged with its outcome
// and ends its stream at once.
func TestPushInputFailureCancelAndEndedTask(t *testing.T) {
	e := newEnv(t, Options{})
	c := e.client(t, true)
	ap := c.startTask("approve", map[string]any{"action": "deploy"})
	c.waitFor(ap, nil, "input_required")
	sl := c.startTask("sleep", map[string]any{"seconds": 1000})
	fl := c.startTask("fail", map[string]any{"mode": "error"})
	c.waitFor(fl, nil, "failed")

	s := e.listenHTTP(t, c, ap, sl)
	s.acked()
	in := s.task()
	reqs, _ := in["inputRequests"].(map[string]any)
	if in["status"] != "input_required" || reqs["approve-1"] == nil {
		t.Fatalf("want the input request, got %s", js(in))
	}
	s.task() // the sleep's current state
	c.update(ap, map[string]any{"approve-1": map[string]any{"action": "accept", "content": map[string]any{"approve": true, "reason": "ok"}}})
	var done map[string]any
	for done == nil { // the answer moves it to working, then it completes
		if m := s.task(); m["taskId"] == ap && m["status"] == "completed" {
			done = m
		} else if m["status"] != "working" && m["taskId"] == ap {
			t.Fatalf("after the answer: %s", js(m))
		}
	}
	if got := resultText(t, done["result"]); got != "approved deploy: ok" {
		t.Fatalf("result %q", got)
	}
	c.ok("tasks/cancel", map[string]any{"taskId": sl})
	for m := s.task(); ; m = s.task() {
		if m["status"] == "cancelled" {
			break
		}
	}
	s.end()

	s = e.listenHTTP(t, c, fl)
	if got := js(s.acked()); got != js([]string{fl}) {
		t.Fatalf("acknowledged %s", got)
	}
	if m := s.task(); m["status"] != "failed" || m["error"].(map[string]any)["message"] != "simulated failure" {
		t.Fatalf("want the failure, got %s", js(m))
	}
	s.end()
}

// Without push the server acknowledges no id and ends the subscription at
// once (as go-sdk does for any server without push); without the
// extension declared, a listen for task ids is refused with -32021, push
// or not.
func TestPushOff(t *testing.T) {
	for _, noPush := range []bool{false, true} {
		e := newEnv(t, Options{NoPush: noPush})
		c := e.client(t, true)
		id := c.startTask("sleep", map[string]any{"seconds": 1000})
		nc := e.client(t, false)
		_, body := nc.listenBody([]string{id})
		status, raw := e.http.post(t, http.Header{"Mcp-Method": {"subscriptions/listen"}}, body)
		if r := parseReply(raw); status != http.StatusBadRequest || r.Error == nil || r.Error.Code != -32021 {
			t.Fatalf("NoPush=%v, no extension: %d %s", noPush, status, raw)
		}
		if !noPush {
			continue
		}
		s := e.listenHTTP(t, c, id)
		if ids := s.acked(); len(ids) != 0 {
			t.Fatalf("NoPush acknowledged %v", ids)
		}
		s.end()
		if n := e.srv.Stats().Subscriptions; n != 0 {
			t.Fatalf("NoPush pushed on %d subscriptions", n)
		}
	}
}

// Many subscribers to one task each get every change, in order.
func TestPushManySubscribers(t *testing.T) {
	e := newEnv(t, Options{Hold: true})
	c := e.client(t, true)
	id := holdTask(t, c, 3)
	var streams []*stream
	for range 20 {
		s := e.listenHTTP(t, c, id)
		s.acked()
		s.task()
		streams = append(streams, s)
	}
	var want []string
	for i := 1; i <= 3; i++ {
		step(t, e.srv, id)
		status := "working"
		if i == 3 {
			status = "completed"
		}
		want = append(want, status+" "+fmt.Sprintf("step %d of 3", min(i, 2)))
	}
	for n, s := range streams {
		var got []string
		for range want {
			m := s.task()
			got = append(got, fmt.Sprint(m["status"], " ", m["statusMessage"]))
		}
		if js(got) != js(want) {
			t.Fatalf("subscriber %d got %v, want %v", n, got, want)
		}
		s.end()
	}
}

// A client that goes away leaves no goroutine and no subscription behind,
// and the task goes on; one still subscribed is ended gracefully when the
// server closes.
func TestPushDisconnectAndClose(t *testing.T) {
	http.DefaultClient.CloseIdleConnections()
	srv := New(Options{Hold: true, Speed: 0.05})
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	defer srv.Close() // first: it ends the streams ts.Close waits for
	e := &env{srv: srv, http: httpRT{url: ts.URL}}
	c := e.client(t, true)
	id := holdTask(t, c, 3)
	http.DefaultClient.CloseIdleConnections()
	settleGoroutines(t, runtime.NumGoroutine())
	before := runtime.NumGoroutine()

	for range 5 {
		s := e.listenHTTP(t, c, id)
		s.acked()
		s.task()
		s.cancel()
	}
	http.DefaultClient.CloseIdleConnections()
	settleGoroutines(t, before)
	srv.tasks.mu.Lock()
	left := len(srv.tasks.subs)
	srv.tasks.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d subscriptions left", left)
	}
	step(t, srv, id)
	until(t, "the step", func() bool { return c.get(id)["statusMessage"] == "step 1 of 3" })

	s := e.listenHTTP(t, c, id)
	s.acked()
	s.task()
	srv.Close()
	for s.peek()["method"] == "notifications/tasks" { // the task's end on Close may come first
		s.next()
	}
	s.end()
}

// Over stdio: the same stream on stdout, ended by notifications/cancelled
// without a result, and gracefully once the task has ended.
func TestPushOverStdio(t *testing.T) {
	e := newEnv(t, Options{Hold: true})
	c := e.client(t, true)
	id := holdTask(t, c, 2)
	rt := e.stdio(t)
	lines := make(chan map[string]any, 64)
	go func() {
		defer close(lines)
		for l := range rt.lines {
			lines <- decode(t, l)
		}
	}()
	sc := &client{t: t, rt: rt, tasks: true}

	listenID, body := sc.listenBody([]string{id, "NOSUCHTASK"})
	rt.send(t, body)
	s := &stream{t: t, id: listenID, msgs: lines}
	if got := js(s.acked()); got != js([]string{id}) {
		t.Fatalf("acknowledged %s", got)
	}
	s.task()
	rt.send(t, []byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":`+listenID+`}}`))
	until(t, "the listen to end", func() bool {
		e.srv.tasks.mu.Lock()
		defer e.srv.tasks.mu.Unlock()
		return len(e.srv.tasks.subs) == 0
	})

	listenID, body = sc.listenBody([]string{id})
	rt.send(t, body)
	s.id = listenID
	s.acked()
	s.task()
	step(t, e.srv, id)
	if m := s.task(); m["statusMessage"] != "step 1 of 2" {
		t.Fatalf("got %s", js(m))
	}
	step(t, e.srv, id)
	if m := s.task(); m["status"] != "completed" {
		t.Fatalf("got %s", js(m))
	}
	m := s.next()
	if js(m["id"]) != listenID || m["result"].(map[string]any)["resultType"] != "complete" {
		t.Fatalf("want the graceful end, got %s", js(m))
	}
	// Nothing was sent for the cancelled listen: the next line answers this.
	d, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": "d", "method": "server/discover", "params": map[string]any{"_meta": sc.meta()}})
	rt.send(t, d)
	if m := s.next(); m["id"] != "d" || m["result"] == nil {
		t.Fatalf("want the discover result, got %s", js(m))
	}
}

// A listen for task ids is checked as go-sdk checks other requests.
func TestPushListenIsChecked(t *testing.T) {
	e := newEnv(t, Options{})
	c := e.client(t, true)
	_, body := c.listenBody([]string{"x"})
	for name, tc := range map[string]struct {
		header http.Header
		body   []byte
		code   int64
	}{
		"version header": {http.Header{"Mcp-Method": {"subscriptions/listen"}, "Mcp-Protocol-Version": {"2025-11-25"}}, body, -32020},
		"version": {http.Header{"Mcp-Method": {"subscriptions/listen"}, "Mcp-Protocol-Version": {"1900-01-01"}},
			bytes.ReplaceAll(body, []byte(protoVersion), []byte("1900-01-01")), -32022},
		"no _meta": {http.Header{"Mcp-Method": {"subscriptions/listen"}},
			[]byte(`{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{"taskIds":["x"]}}}`), -32602},
	} {
		status, raw := e.http.post(t, tc.header, tc.body)
		if r := parseReply(raw); status != http.StatusBadRequest || r.Error == nil || r.Error.Code != tc.code {
			t.Errorf("%s: %d %s, want 400 and %d", name, status, raw, tc.code)
		}
	}
}

// A subscriber that stops reading is dropped once maxQueued changes wait
// for it: its stream ends without the graceful result, the task and the
// session go on.
func TestPushDropsAStalledSubscriber(t *testing.T) {
	e := newEnv(t, Options{Hold: true})
	c := e.client(t, true)
	const steps = 4 * maxQueued // the writer may hold a batch when it blocks
	id := holdTask(t, c, steps)
	rt := e.stdio(t) // nothing reads its output until the end: its writes block
	sc := &client{t: t, rt: rt, tasks: true}
	_, body := sc.listenBody([]string{id})
	rt.send(t, body)
	dropped := func() bool {
		e.srv.tasks.mu.Lock()
		defer e.srv.tasks.mu.Unlock()
		return len(e.srv.tasks.subs) == 0
	}
	until(t, "the subscription", func() bool { return !dropped() })
	deadline := time.Now().Add(waitfor.Scale(10 * time.Second))
	for i := 0; i < steps-1 && !dropped(); {
		if e.srv.Step(id) == nil {
			i++
		} else if time.Now().After(deadline) {
			t.Fatal("the hold task stopped taking steps")
		} else {
			runtime.Gosched()
		}
	}
	if !dropped() {
		t.Fatal("the stalled subscriber was not dropped")
	}
	d, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": "d", "method": "server/discover", "params": map[string]any{"_meta": sc.meta()}})
	rt.send(t, d)
	var got []map[string]any // the stream's messages, up to the discover's reply
	for len(got) == 0 || got[len(got)-1]["id"] != "d" {
		select {
		case l := <-rt.lines:
			got = append(got, decode(t, l))
		case <-time.After(waitfor.Scale(10 * time.Second)):
			t.Fatalf("after %d messages: nothing more", len(got))
		}
	}
	for _, m := range got[:len(got)-1] {
		if m["method"] != "notifications/tasks" && m["method"] != "notifications/subscriptions/acknowledged" {
			t.Fatalf("the dropped stream carried %s", js(m))
		}
	}
	if c.get(id)["status"] != "working" {
		t.Fatal("the task did not go on")
	}
}

// A listen for more ids than maxQueued is not a slow reader: the views
// it opens with are not counted against the bound, so a stream for 2,000
// open tasks carries every one's state and then the changes that follow
// (issue 20, item 13: it was dropped at once).
func TestPushOpensWithManyTasks(t *testing.T) {
	e := newEnv(t, Options{Hold: true, TTL: time.Hour})
	c := e.client(t, true)
	const n = 2 * maxQueued
	ids := make([]string, 0, n)
	for len(ids) < n-1 { // open tasks straight in the table: 2,000 calls would cost the test its time
		task, _, err := e.srv.tasks.create()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.srv.tasks.done(task) })
		ids = append(ids, task.id)
	}
	held := holdTask(t, c, 1)
	ids = append(ids, held)
	s := e.listenHTTP(t, c, ids...)
	if acked := s.acked(); len(acked) != n {
		t.Fatalf("%d ids acknowledged, want %d", len(acked), n)
	}
	seen := map[any]bool{}
	for range n {
		seen[s.task()["taskId"]] = true
	}
	if len(seen) != n {
		t.Fatalf("the stream opened with %d distinct tasks' states, want %d", len(seen), n)
	}
	step(t, e.srv, held)
	if got := s.task(); got["taskId"] != held || got["status"] != "completed" {
		t.Fatalf("after the opening states: %s, want %s completed", js(got), held)
	}
}
