package mcpclient_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/internal/hostile"
	"github.com/taskdeck/taskdeck/internal/waitfor"
	"github.com/taskdeck/taskdeck/mcpclient"
	"github.com/taskdeck/taskdeck/mcpclient/wire"
	"github.com/taskdeck/taskdeck/model"
)

// diagnose probes url with a pool whose requests are bounded by timeout.
func diagnose(t *testing.T, url string, timeout time.Duration) *mcpclient.Diagnosis {
	t.Helper()
	pool := mcpclient.NewPool(mcpclient.PoolOptions{RequestTimeout: timeout})
	t.Cleanup(pool.Close)
	ctx, cancel := context.WithTimeout(context.Background(), waitfor.Scale(4*timeout))
	defer cancel()
	return pool.Diagnose(ctx, model.ServerRef{URL: url})
}

// TestDiagnoseDemo: the demo server speaks 2026-07-28 with the tasks
// extension, answers a listen, answers tasks/get of a task it never made
// -32602, and every tool of it may answer with a task: nothing would break.
func TestDiagnoseDemo(t *testing.T) {
	d := demo.New(demo.Options{})
	t.Cleanup(d.Close)
	srv := httptest.NewServer(d.Handler())
	t.Cleanup(srv.Close)
	got := diagnose(t, srv.URL+"/mcp", waitfor.Scale(5*time.Second))
	if !got.Reached || got.Revision != wire.ProtocolVersion || !got.Tasks || !got.Push || got.Acknowledged || got.UnknownTask != "-32602" {
		t.Fatalf("diagnosis of the demo: %+v", got)
	}
	if !slices.Contains(got.TaskTools, "sleep") || got.Tools != len(got.TaskTools) {
		t.Errorf("the demo's tools that may answer with a task: %v of %d", got.TaskTools, got.Tools)
	}
	if len(got.Problems) != 0 {
		t.Errorf("problems with the demo: %+v", got.Problems)
	}
}

// TestDiagnoseNoTasks: a plain go-sdk server (tools, no tasks) is reached;
// the diagnosis says that it offers no tasks and what that breaks.
func TestDiagnoseNoTasks(t *testing.T) {
	s := mcp.NewServer(&mcp.Implementation{Name: "plain", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "greet", Description: "says hello"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "hello"}}}, nil, nil
	})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(srv.Close)
	got := diagnose(t, srv.URL, waitfor.Scale(5*time.Second))
	if !got.Reached || got.Tasks || got.ServerName != "plain" || got.Tools != 1 || len(got.TaskTools) != 0 || got.Push || got.UnknownTask != "" {
		t.Fatalf("diagnosis of a server without tasks: %+v", got)
	}
	if len(got.Problems) != 1 || !strings.Contains(got.Problems[0].What, "offers no tasks") || got.Problems[0].Remedy == "" {
		t.Fatalf("problems of a server without tasks: %+v", got.Problems)
	}
}

// TestDiagnoseRedirect: a server that redirects is not followed; one line
// says so, with the remedy.
func TestDiagnoseRedirect(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://127.0.0.1:1/elsewhere", http.StatusTemporaryRedirect)
	}))
	t.Cleanup(srv.Close)
	got := diagnose(t, srv.URL+"/mcp", waitfor.Scale(5*time.Second))
	if got.Reached || len(got.Problems) != 1 || !strings.Contains(got.Problems[0].What, "redirect") ||
		!strings.Contains(got.Problems[0].Remedy, "does not follow redirects") || strings.Contains(got.Problems[0].What, "\n") {
		t.Fatalf("diagnosis of a server that redirects: %+v", got)
	}
}

// TestDiagnoseHang: a server that accepts connections and never answers
// is given up on within the request timeout, in one line.
func TestDiagnoseHang(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// Connections are held open, never answered, until the test ends.
	held := make(chan net.Conn, 64)
	t.Cleanup(func() {
		l.Close()
		for {
			select {
			case c := <-held:
				c.Close()
			default:
				return
			}
		}
	})
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			select {
			case held <- c:
			default:
				c.Close()
			}
		}
	}()
	got := diagnose(t, "http://"+l.Addr().String()+"/mcp", 300*time.Millisecond)
	if got.Reached || len(got.Problems) != 1 || !strings.Contains(got.Problems[0].Remedy, "does not answer") || strings.Contains(got.Problems[0].What, "\n") {
		t.Fatalf("diagnosis of a server that hangs: %+v", got)
	}
}

// TestDiagnoseLies: a server that answers tasks/get of a task it never
// made with an error other than -32602, and acknowledges a listen of that
// made-up id, is reached; each lie is one problem with its remedy.
func TestDiagnoseLies(t *testing.T) {
	srv := hostile.Start(t, demo.Options{})
	srv.On(wire.MethodGet, hostile.Error(-32603, "internal error"))
	srv.On(wire.MethodListen, hostile.ListenScript(true, ack("taskdeck-doctor-probe-0000")))
	got := diagnose(t, srv.URL, waitfor.Scale(5*time.Second))
	if !got.Reached || !got.Tasks || got.UnknownTask == "-32602" || !got.Push || !got.Acknowledged {
		t.Fatalf("diagnosis of a server that lies: %+v", got)
	}
	if len(got.Problems) != 2 || !strings.Contains(got.Problems[0].What, "not answered -32602") || !strings.Contains(got.Problems[1].What, "acknowledged a task id the server never made") {
		t.Fatalf("problems of a server that lies: %+v", got.Problems)
	}
}

// TestDiagnoseCallDemo: allowed to call a tool, the probe reads the poll
// interval and TTL the demo gives its task, then cancels it; a tool that
// asks for input before any task says which kind, and one that answers
// at once says there are no hints.
func TestDiagnoseCallDemo(t *testing.T) {
	d := demo.New(demo.Options{PollInterval: 700 * time.Millisecond, TTL: 3 * time.Minute})
	t.Cleanup(d.Close)
	srv := httptest.NewServer(d.Handler())
	t.Cleanup(srv.Close)
	pool := mcpclient.NewPool(mcpclient.PoolOptions{RequestTimeout: waitfor.Scale(5 * time.Second)})
	t.Cleanup(pool.Close)
	ctx, cancel := context.WithTimeout(context.Background(), waitfor.Scale(30*time.Second))
	defer cancel()
	ref := model.ServerRef{URL: srv.URL + "/mcp"}

	got := pool.DiagnoseCall(ctx, ref, mcpclient.ProbeCall{Tool: "sleep", Args: []byte(`{"seconds":600}`)})
	s := got.Sample
	if s == nil || s.Answer != "task" || s.PollIntervalMs == nil || *s.PollIntervalMs != 700 || s.TTLMs == nil || *s.TTLMs != 180000 || !s.Cancelled || len(got.Problems) != 0 {
		t.Fatalf("diagnosis with a sleep call: %+v, sample %+v", got, s)
	}
	sess, err := pool.Session(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := sess.GetTask(ctx, s.TaskID)
	if err != nil || snap.Status != model.StatusCancelled {
		t.Fatalf("the probe's task after the probe: %+v (%v), want cancelled", snap, err)
	}

	got = pool.DiagnoseCall(ctx, ref, mcpclient.ProbeCall{Tool: "confirm_first"})
	if s := got.Sample; s == nil || s.Answer != "input" || !slices.Equal(s.InputKinds, []string{"elicitation/create"}) || s.TaskID != "" {
		t.Errorf("diagnosis with confirm_first: sample %+v", s)
	}
	got = pool.DiagnoseCall(ctx, ref, mcpclient.ProbeCall{Tool: "echo", Args: []byte(`{"text":"x"}`)})
	if s := got.Sample; s == nil || s.Answer != "result" || s.PollIntervalMs != nil {
		t.Errorf("diagnosis with echo: sample %+v", s)
	}
	got = pool.DiagnoseCall(ctx, ref, mcpclient.ProbeCall{Tool: "no_such_tool"})
	if got.Sample != nil || len(got.Problems) != 1 || !strings.Contains(got.Problems[0].What, "the call of no_such_tool failed") {
		t.Errorf("diagnosis with an unknown tool: %+v", got)
	}
}
