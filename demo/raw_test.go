package demo

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/internal/waitfor"
)

// A raw JSON-RPC client, written by hand so that the tests check the
// server's wire output independently of go-sdk's client and of ours.

const protoVersion = "2026-07-28"
const extID = "io.modelcontextprotocol/tasks"

type rpcError struct {
	Code    int64           `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
}

type response struct {
	Status int // HTTP status; 0 over stdio
	ID     json.RawMessage
	Result map[string]any
	Error  *rpcError
	Raw    string
}

// roundTripper sends one JSON-RPC body and returns the reply to it.
type roundTripper interface {
	roundTrip(t *testing.T, header http.Header, body []byte) response
}

type client struct {
	t     *testing.T
	rt    roundTripper
	tasks bool // declare the extension in _meta
	next  int
}

func (c *client) meta() map[string]any {
	caps := map[string]any{"elicitation": map[string]any{"form": map[string]any{}}}
	if c.tasks {
		caps["extensions"] = map[string]any{extID: map[string]any{}}
	}
	return map[string]any{
		"io.modelcontextprotocol/protocolVersion":    protoVersion,
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "raw-test", "version": "1"},
		"io.modelcontextprotocol/clientCapabilities": caps,
	}
}

// call sends a well-formed request with the 2026-07-28 _meta and headers.
func (c *client) call(method string, params map[string]any) response {
	c.t.Helper()
	if params == nil {
		params = map[string]any{}
	}
	params["_meta"] = c.meta()
	c.next++
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": c.next, "method": method, "params": params})
	if err != nil {
		c.t.Fatal(err)
	}
	h := http.Header{}
	h.Set("Mcp-Method", method)
	switch {
	case method == "tools/call":
		h.Set("Mcp-Name", fmt.Sprint(params["name"]))
	case strings.HasPrefix(method, "tasks/"):
		h.Set("Mcp-Name", fmt.Sprint(params["taskId"]))
	}
	r := c.rt.roundTrip(c.t, h, body)
	if string(r.ID) != fmt.Sprint(c.next) {
		c.t.Fatalf("%s: reply id %s, want %d: %s", method, r.ID, c.next, r.Raw)
	}
	return r
}

func (c *client) ok(method string, params map[string]any) map[string]any {
	c.t.Helper()
	r := c.call(method, params)
	if r.Error != nil || r.Result == nil {
		c.t.Fatalf("%s: want a result, got %s", method, r.Raw)
	}
	return r.Result
}

func (c *client) fails(method string, params map[string]any, code int64) *rpcError {
	c.t.Helper()
	r := c.call(method, params)
	if r.Error == nil || r.Error.Code != code {
		c.t.Fatalf("%s: want error %d, got %s", method, code, r.Raw)
	}
	return r.Error
}

func (c *client) tool(name string, args map[string]any) map[string]any {
	c.t.Helper()
	return c.ok("tools/call", map[string]any{"name": name, "arguments": args})
}

// startTask calls a tool and checks the CreateTaskResult.
func (c *client) startTask(name string, args map[string]any) string {
	c.t.Helper()
	res := c.tool(name, args)
	if res["resultType"] != "task" || res["status"] != "working" {
		c.t.Fatalf("%s: want a working task handle, got %v", name, res)
	}
	for _, k := range []string{"createdAt", "lastUpdatedAt"} {
		if _, err := time.Parse(time.RFC3339Nano, fmt.Sprint(res[k])); err != nil {
			c.t.Fatalf("%s: %s: %v", name, k, err)
		}
	}
	if _, ok := res["ttlMs"].(float64); !ok {
		c.t.Fatalf("%s: no ttlMs in %v", name, res)
	}
	if _, ok := res["pollIntervalMs"].(float64); !ok {
		c.t.Fatalf("%s: no pollIntervalMs in %v", name, res)
	}
	if _, ok := res["result"]; ok {
		c.t.Fatalf("%s: a handle carries no result: %v", name, res)
	}
	return res["taskId"].(string)
}

func (c *client) get(id string) map[string]any {
	c.t.Helper()
	res := c.ok("tasks/get", map[string]any{"taskId": id})
	if res["resultType"] != "complete" || res["taskId"] != id {
		c.t.Fatalf("tasks/get: bad result %v", res)
	}
	return res
}

// waitFor polls until the task's status is one of want, calling seen on
// every snapshot.
func (c *client) waitFor(id string, seen func(map[string]any), want ...string) map[string]any {
	c.t.Helper()
	deadline := time.Now().Add(waitfor.Scale(10 * time.Second))
	for time.Now().Before(deadline) {
		res := c.get(id)
		if seen != nil {
			seen(res)
		}
		for _, w := range want {
			if res["status"] == w {
				return res
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	c.t.Fatalf("task never reached %v", want)
	return nil
}

func (c *client) update(id string, responses map[string]any) {
	c.t.Helper()
	res := c.ok("tasks/update", map[string]any{"taskId": id, "inputResponses": responses})
	if res["resultType"] != "complete" {
		c.t.Fatalf("tasks/update: %v", res)
	}
}

// resultText is the first text content of a tools/call result.
func resultText(t *testing.T, res any) string {
	t.Helper()
	m, _ := res.(map[string]any)
	content, _ := m["content"].([]any)
	if len(content) == 0 {
		t.Fatalf("no content in %v", res)
	}
	return fmt.Sprint(content[0].(map[string]any)["text"])
}

func parseReply(raw []byte) response {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Result map[string]any  `json:"result"`
		Error  *rpcError       `json:"error"`
	}
	r := response{Raw: string(raw)}
	if json.Unmarshal(raw, &m) == nil {
		r.ID, r.Result, r.Error = m.ID, m.Result, m.Error
	}
	return r
}

// httpRT posts to a real loopback server.
type httpRT struct{ url string }

func (h httpRT) roundTrip(t *testing.T, header http.Header, body []byte) response {
	t.Helper()
	status, raw := h.post(t, header, body)
	r := parseReply(raw)
	r.Status = status
	return r
}

// post sends a body with the 2026-07-28 headers (plus header) and returns
// the status and the JSON-RPC message, read from SSE data lines if needed.
func (h httpRT) post(t *testing.T, header http.Header, body []byte) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, h.url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", protoVersion)
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		var msg []byte
		for line := range strings.Lines(string(data)) {
			if d, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), "data:"); ok {
				msg = []byte(strings.TrimSpace(d)) // the last message is the response
			}
		}
		data = msg
	}
	return resp.StatusCode, data
}

// stdioRT talks to ServeStdio over a pair of pipes.
type stdioRT struct {
	in    *io.PipeWriter
	lines chan []byte
}

func (s *stdioRT) roundTrip(t *testing.T, _ http.Header, body []byte) response {
	t.Helper()
	s.send(t, body)
	return s.reply(t)
}

func (s *stdioRT) send(t *testing.T, line []byte) {
	t.Helper()
	if _, err := s.in.Write(append(line, '\n')); err != nil {
		t.Fatal(err)
	}
}

func (s *stdioRT) reply(t *testing.T) response {
	t.Helper()
	select {
	case line, ok := <-s.lines:
		if !ok {
			t.Fatal("stdio server ended")
		}
		return parseReply(line)
	case <-time.After(waitfor.Scale(10 * time.Second)):
		t.Fatal("no reply on stdio")
	}
	return response{}
}

// env is a server under test with its transports.
type env struct {
	srv  *Server
	http httpRT
}

func newEnv(t *testing.T, opts Options) *env {
	t.Helper()
	if opts.Speed == 0 {
		opts.Speed = 0.05
	}
	srv := New(opts)
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		srv.Close()
		ts.Close()
	})
	return &env{srv: srv, http: httpRT{url: ts.URL + "/mcp"}}
}

func (e *env) client(t *testing.T, tasks bool) *client {
	return &client{t: t, rt: e.http, tasks: tasks}
}

// stdio starts ServeStdio on pipes; the session ends at cleanup.
func (e *env) stdio(t *testing.T) *stdioRT {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	rt := &stdioRT{in: inW, lines: make(chan []byte, 16)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- e.srv.ServeStdio(ctx, inR, outW)
		outW.Close()
	}()
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(rt.lines)
		sc := bufio.NewScanner(outR)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			rt.lines <- bytes.Clone(sc.Bytes())
		}
	})
	t.Cleanup(func() {
		cancel()
		go func() {
			for range rt.lines { // unread replies must not block the server
			}
		}()
		if err := <-done; err != nil {
			t.Errorf("ServeStdio: %v", err)
		}
		wg.Wait()
	})
	return rt
}

// settleGoroutines waits for the goroutine count to drop to at most n.
func settleGoroutines(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(waitfor.Scale(5 * time.Second))
	for runtime.NumGoroutine() > n {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("goroutines: %d, want <= %d\n%s", runtime.NumGoroutine(), n, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}
