package proxy

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/internal/hostile"
	"github.com/taskdeck/taskdeck/internal/waitfor"
	"github.com/taskdeck/taskdeck/model"
)

// stdioClient connects go-sdk's client to ServeStdio over pipes, as an
// agent that launched `taskdeck proxy --stdio demo` would be.
func stdioClient(t *testing.T, r *rig, name string) *mcp.ClientSession {
	t.Helper()
	return stdioClientOf(t, r, mcp.NewClient(&mcp.Implementation{Name: name, Version: "1"}, nil))
}

func stdioClientOf(t *testing.T, r *rig, c *mcp.Client) *mcp.ClientSession {
	t.Helper()
	agentIn, proxyOut := io.Pipe()
	proxyIn, agentOut := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- r.proxy.ServeStdio(context.Background(), "demo", proxyIn, proxyOut)
		proxyOut.Close()
	}()
	cs, err := c.Connect(context.Background(), &mcp.IOTransport{Reader: agentIn, Writer: agentOut}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.Close()
		agentOut.Close()
		if err := <-done; err != nil {
			t.Errorf("ServeStdio: %v", err)
		}
	})
	return cs
}

// Over stdio: discovery and tools/list pass through, a held call
// completes, and a call the agent cancels (notifications/cancelled) ends
// for the agent while its task goes on to its end.
func TestStdioAgent(t *testing.T) {
	r := startRig(t, demo.Options{}, Options{})
	cs := stdioClient(t, r, "stdio-agent")
	if _, ok := cs.InitializeResult().Capabilities.Extensions["io.modelcontextprotocol/tasks"]; !ok {
		t.Fatal("server/discover over stdio does not advertise the tasks extension")
	}
	ctx := context.Background()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) < 7 {
		t.Fatalf("tools/list over stdio: %v, %d tools", err, len(tools.Tools))
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "sleep", Arguments: map[string]any{"seconds": 1}})
	if err != nil || !strings.Contains(text(t, res), "slept") {
		t.Fatalf("sleep over stdio: %v %+v", err, res)
	}
	cctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: "sleep", Arguments: map[string]any{"seconds": 3}})
		errc <- err
	}()
	var rec *model.Task
	until(t, "the second task's handle", func() bool {
		for _, e := range mustList(t, r) {
			if e.Task.Status == model.StatusWorking && e.Task.TaskID != "" {
				rec = e.Task
				return true
			}
		}
		return false
	})
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("a cancelled call returned no error")
	}
	until(t, "the task's end", func() bool {
		e, err := r.eng.Get(ctx, rec.ID)
		return err == nil && e.Task.Status == model.StatusCompleted
	})
	for _, e := range mustList(t, r) {
		if e.Task.Agent != "stdio-agent" {
			t.Fatalf("record names agent %q", e.Task.Agent)
		}
	}
}

// A stdio server behind the proxy (the engine's child): discovery and
// tools/list come from the Deck, calls are held as for any server, and
// what the Deck does not serve is refused in words.
func TestStdioUpstream(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	srv := hostile.Start(t, demo.Options{}) // unused by the stdio server; the rig wants one
	cfg, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"demo": map[string]any{
		"command": exe, "args": []string{"-test.run=^$"}, "env": map[string]string{"TASKDECK_PROXY_DEMO_STDIO": "1"},
	}}})
	r := startRigWith(t, srv, string(cfg), Options{})
	cs := goClient(t, r.url, "go-agent")
	if _, ok := cs.InitializeResult().Capabilities.Extensions["io.modelcontextprotocol/tasks"]; !ok {
		t.Fatal("server/discover for a stdio server does not advertise the tasks extension")
	}
	ctx := context.Background()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) < 7 {
		t.Fatalf("tools/list of a stdio server: %v, %+v", err, tools)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "sleep", Arguments: map[string]any{"seconds": 1}})
	if err != nil || !strings.Contains(text(t, res), "slept") {
		t.Fatalf("sleep on a stdio server: %v %+v", err, res)
	}
	if _, err := cs.ListPrompts(ctx, nil); err == nil || !strings.Contains(err.Error(), "only tools and tasks") {
		t.Fatalf("prompts/list of a stdio server: %v", err)
	}
	if n := len(srv.Requests("")); n != 0 {
		t.Fatalf("the HTTP server got %d requests meant for the stdio one", n)
	}
}

// rawStdio runs ServeStdio on an os.Pipe whose writer the test holds, as
// an agent's stdin that stays open; answers come back one per line.
type rawStdio struct {
	in      *os.File
	answers chan answer
	done    chan error
	cancel  context.CancelFunc
}

func startRawStdio(t *testing.T, r *rig, parent context.Context) *rawStdio {
	t.Helper()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(parent)
	s := &rawStdio{in: pw, answers: make(chan answer, 16), done: make(chan error, 1), cancel: cancel}
	go func() {
		s.done <- r.proxy.ServeStdio(ctx, "demo", pr, outW)
		outW.Close()
	}()
	go func() {
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			var a answer
			if err := json.Unmarshal(sc.Bytes(), &a); err != nil {
				t.Errorf("ServeStdio wrote %q: %v", sc.Bytes(), err)
			}
			s.answers <- a
		}
	}()
	t.Cleanup(func() {
		cancel()
		pw.Close()
		pr.Close()
		outR.Close()
	})
	return s
}

func (s *rawStdio) send(t *testing.T, msg string) {
	t.Helper()
	if _, err := io.WriteString(s.in, msg+"\n"); err != nil {
		t.Fatal(err)
	}
}

func (s *rawStdio) answer(t *testing.T) answer {
	t.Helper()
	select {
	case a := <-s.answers:
		return a
	case <-time.After(waitfor.Scale(10 * time.Second)):
		t.Fatal("no answer over stdio")
		return answer{}
	}
}

// returned waits for ServeStdio to return, within bound.
func (s *rawStdio) returned(t *testing.T, bound time.Duration) {
	t.Helper()
	select {
	case err := <-s.done:
		if err != nil {
			t.Fatalf("ServeStdio: %v", err)
		}
	case <-time.After(bound):
		t.Fatalf("ServeStdio did not return within %s", bound)
	}
}

// heldCall is a tools/call of an agent without the tasks extension: held.
func heldCall(id string, seconds int) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"sleep","arguments":{"seconds":%d},"_meta":%s}}`, id, seconds, metaJSON("raw-agent", false))
}

// working waits for the one record to have its server's task, working.
func working(t *testing.T, r *rig) *model.Task {
	t.Helper()
	var rec *model.Task
	until(t, "a working task", func() bool {
		for _, e := range mustList(t, r) {
			if e.Task.Status == model.StatusWorking && e.Task.TaskID != "" {
				rec = e.Task
				return true
			}
		}
		return false
	})
	return rec
}

// SIGTERM (ctx ends) stops ServeStdio though the agent keeps stdin open
// and a call is held; the task goes on in the engine.
func TestStdioStopsWhenCtxEnds(t *testing.T) {
	r := startRig(t, demo.Options{}, Options{})
	s := startRawStdio(t, r, context.Background())
	s.send(t, heldCall("1", 60))
	rec := working(t, r)
	s.cancel()
	s.returned(t, 3*time.Second)
	if a := s.answer(t); a.Error == nil || !strings.Contains(a.Error.Message, "the task goes on") {
		t.Fatalf("the held call was answered %+v", a)
	}
	if e, err := r.eng.Get(context.Background(), rec.ID); err != nil || e.Task.Status != model.StatusWorking {
		t.Fatalf("after the proxy stopped the task is %v %v; want it working on", e.Task, err)
	}
}

// When the agent closes stdin, the held calls end at once (their tasks
// go on to their end in the engine).
func TestStdioEOFEndsHeldCalls(t *testing.T) {
	r := startRig(t, demo.Options{}, Options{})
	s := startRawStdio(t, r, context.Background())
	s.send(t, heldCall("1", 60))
	rec := working(t, r)
	s.in.Close()
	s.returned(t, 3*time.Second)
	if e, err := r.eng.Get(context.Background(), rec.ID); err != nil || e.Task.Status != model.StatusWorking {
		t.Fatalf("after stdin closed the task is %v %v; want it working on", e.Task, err)
	}
}

// Over stdio: a line over MaxBody, a call without an id and a second
// request with an id in flight are each refused in one line, record
// nothing, and the session goes on.
func TestStdioBadLines(t *testing.T) {
	r := startRig(t, demo.Options{}, Options{MaxBody: 1 << 10})
	s := startRawStdio(t, r, context.Background())
	refused := func(what, says string) {
		t.Helper()
		a := s.answer(t)
		if a.Error == nil || a.Error.Code != -32600 || !strings.Contains(a.Error.Message, says) {
			t.Fatalf("%s: answered %+v; want -32600 saying %q", what, a.Error, says)
		}
	}
	s.send(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"`+strings.Repeat("x", 4<<10)+`"}}}`)
	refused("a line over the bound", "larger than")
	s.send(t, `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"sleep","arguments":{"seconds":1}}}`)
	refused("a call without an id", "need an id")
	if n := len(mustList(t, r)); n != 0 {
		t.Fatalf("refused lines left %d records", n)
	}
	s.send(t, heldCall("7", 20))
	working(t, r)
	s.send(t, heldCall("7", 1))
	refused("a second request with id 7", "still in flight")
	if n := len(mustList(t, r)); n != 1 {
		t.Fatalf("%d records; want the first call's only", n)
	}
	if a := s.answer(t); a.Error != nil || !strings.Contains(string(a.Result["content"]), "slept") {
		t.Fatalf("the first call with id 7 was answered %+v %s", a.Error, a.Result["content"])
	}
}

// A held call that ends at the agent's own deadline is told it was left,
// not that the proxy's hold limit (30 minutes here) passed.
func TestHeldCallAgentDeadline(t *testing.T) {
	r := startRig(t, demo.Options{}, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	s := startRawStdio(t, r, ctx)
	s.send(t, heldCall("1", 60))
	a := s.answer(t)
	if a.Error == nil || !strings.Contains(a.Error.Message, "the call was left") {
		t.Fatalf("a call ended by the agent's deadline was answered %+v %s", a.Error, a.Result["content"])
	}
}

// The 2025-11-25 front over stdio, its session this connection: an agent
// that initializes with that revision gets the proxy's InitializeResult,
// task-optional tools, a task for tools/call with params.task, approve's
// question relayed to it on tasks/result as elicitation/create marked
// with the task (its reply the record's answer), the result, and its
// task in tasks/list.
func TestStdioLegacyAgent(t *testing.T) {
	r := startRig(t, demo.Options{}, Options{})
	s := startRawStdio(t, r, context.Background())
	s.send(t, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"stdio-legacy","version":"1"}}}`)
	if a := s.answer(t); str(a.Result["protocolVersion"]) != "2025-11-25" || !strings.Contains(string(a.Result["capabilities"]), `"requests":{"tools":{"call":{}}}`) {
		t.Fatalf("initialize over stdio: %+v", a)
	}
	s.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	s.send(t, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	var tools []struct {
		Name      string
		Execution struct{ TaskSupport string }
	}
	if a := s.answer(t); json.Unmarshal(a.Result["tools"], &tools) != nil || len(tools) == 0 {
		t.Fatalf("tools/list over stdio: %+v", a)
	}
	for _, tool := range tools {
		if tool.Execution.TaskSupport != "optional" {
			t.Errorf("tool %s says taskSupport %q, want optional", tool.Name, tool.Execution.TaskSupport)
		}
	}
	s.send(t, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"approve","arguments":{"action":"ship"},"task":{"ttl":60000}}}`)
	var task struct{ TaskID, Status string }
	if a := s.answer(t); json.Unmarshal(a.Result["task"], &task) != nil || task.TaskID == "" {
		t.Fatalf("a task-augmented call over stdio: %+v", a)
	}
	s.send(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":4,"method":"tasks/result","params":{"taskId":%q}}`, task.TaskID))
	q := s.answer(t)
	if q.Method != "elicitation/create" || !strings.Contains(string(q.Params), task.TaskID) {
		t.Fatalf("on tasks/result the agent got %+v, want approve's question marked with task %s", q, task.TaskID)
	}
	s.send(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"action":"accept","content":{"approve":true,"reason":"over stdio"}}}`, q.ID))
	if a := s.answer(t); a.Error != nil || !strings.Contains(string(a.Result["content"]), "approved ship: over stdio") {
		t.Fatalf("tasks/result after the agent's answer: %+v %s", a.Error, a.Result["content"])
	}
	s.send(t, `{"jsonrpc":"2.0","id":5,"method":"tasks/list"}`)
	var listed []struct{ TaskID, Status string }
	if a := s.answer(t); json.Unmarshal(a.Result["tasks"], &listed) != nil || len(listed) != 1 || listed[0].TaskID != task.TaskID || listed[0].Status != "completed" {
		t.Fatalf("tasks/list over stdio: %+v, want task %s completed", listed, task.TaskID)
	}
	if list := mustList(t, r); len(list) != 1 || list[0].Task.Agent != "stdio-legacy" {
		t.Fatalf("records %+v: want the call's alone, of stdio-legacy", list)
	}
}
