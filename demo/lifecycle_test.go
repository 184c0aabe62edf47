package demo

import (
	"context"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/taskdeck/taskdeck/internal/waitfor"
	"github.com/taskdeck/taskdeck/mcpclient/wire"
)

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func TestCloseLeavesNoGoroutines(t *testing.T) {
	http.DefaultClient.CloseIdleConnections()
	settleGoroutines(t, runtime.NumGoroutine())
	before := runtime.NumGoroutine()

	srv := New(Options{Speed: 0.05})
	ts := httptest.NewServer(srv.Handler())
	c := &client{t: t, rt: httpRT{url: ts.URL}, tasks: true}
	for range 5 {
		c.startTask("sleep", map[string]any{"seconds": 1000})
	}
	blocked := c.startTask("approve", map[string]any{"action": "x"})
	c.waitFor(blocked, nil, "input_required")
	c.startTask("pipeline", map[string]any{"stages": 20})

	inR, inW := io.Pipe()
	stdioDone := make(chan error, 1)
	go func() { stdioDone <- srv.ServeStdio(context.Background(), inR, io.Discard) }()

	srv.Close()
	select {
	case err := <-stdioDone:
		if err != nil {
			t.Errorf("ServeStdio after Close: %v", err)
		}
	case <-time.After(waitfor.Scale(5 * time.Second)):
		t.Fatal("ServeStdio did not end on Close")
	}
	inW.Close()
	// Tasks cannot be created any more; answers stay well-formed.
	if r := c.call("tools/call", map[string]any{"name": "sleep", "arguments": map[string]any{"seconds": 1}}); r.Error == nil || r.Error.Code != -32603 {
		t.Fatalf("tools/call after Close: %s", r.Raw)
	}
	ts.Close()
	http.DefaultClient.CloseIdleConnections()
	settleGoroutines(t, before)
}

func TestTTLEndsRunningTask(t *testing.T) {
	http.DefaultClient.CloseIdleConnections()
	e := newEnv(t, Options{TTL: 100 * time.Millisecond})
	c := e.client(t, true)
	c.startTask("sleep", map[string]any{"seconds": 1000}) // warm up: the server's lazy goroutines
	time.Sleep(150 * time.Millisecond)
	http.DefaultClient.CloseIdleConnections()
	settleGoroutines(t, runtime.NumGoroutine())
	before := runtime.NumGoroutine()
	c.startTask("sleep", map[string]any{"seconds": 1000})
	c.startTask("approve", map[string]any{"action": "x"})
	http.DefaultClient.CloseIdleConnections()
	settleGoroutines(t, before) // both goroutines end at their expiry, without Close
}

// The go-sdk client, in memory: MCPServer is usable as it is.
func TestInMemoryWithGoSDKClient(t *testing.T) {
	srv := New(Options{Speed: 0.05})
	defer srv.Close()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.MCPServer().Connect(t.Context(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	caps := &mcp.ClientCapabilities{}
	caps.AddExtension(wire.ExtensionID, nil)
	cl := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, &mcp.ClientOptions{Capabilities: caps})
	must(mcp.AddSendingCustomMethod[*wire.GetTaskParams, *wire.GetTaskResult](cl, wire.MethodGet))
	cs, err := cl.Connect(t.Context(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if v := cs.InitializeResult().ProtocolVersion; v != wire.ProtocolVersion {
		t.Fatalf("negotiated %s", v)
	}
	if _, ok := cs.InitializeResult().Capabilities.Extensions[wire.ExtensionID]; !ok {
		t.Fatal("extension not advertised")
	}
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "x"}})
	if err != nil || res.Content[0].(*mcp.TextContent).Text != "x" {
		t.Fatalf("echo: %v %v", res, err)
	}
	// go-sdk's CallTool drops the handle; the table still has the task.
	if _, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "sleep", Arguments: map[string]any{"seconds": 1}}); err != nil {
		t.Fatal(err)
	}
	ids := srv.Stats().TaskIDs
	if len(ids) != 1 {
		t.Fatalf("task ids %v", ids)
	}
	for {
		got, err := mcp.CallCustomMethod[*wire.GetTaskParams, *wire.GetTaskResult](t.Context(), cs, wire.MethodGet, &wire.GetTaskParams{TaskID: ids[0]})
		if err != nil {
			t.Fatal(err)
		}
		if got.Status == "completed" {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	_, err = mcp.CallCustomMethod[*wire.GetTaskParams, *wire.GetTaskResult](t.Context(), cs, wire.MethodGet, &wire.GetTaskParams{TaskID: "gone"})
	var jerr *jsonrpc.Error
	if !errorsAs(err, &jerr) || jerr.Code != wire.CodeInvalidParams {
		t.Fatalf("unknown task: %v", err)
	}
}

func errorsAs(err error, target **jsonrpc.Error) bool { return errors.As(err, target) }
