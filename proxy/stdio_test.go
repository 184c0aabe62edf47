package proxy

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/internal/hostile"
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
