package proxy

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/internal/waitfor"
	"github.com/taskdeck/taskdeck/model"
)

// go-sdk's client declares no tasks: every demo tool, task-only ones
// included, completes for it as an ordinary result, and each call is a
// record that names the agent.
func TestHoldEveryToolCompletes(t *testing.T) {
	r := startRig(t, demo.Options{}, Options{})
	cs := goClient(t, r.url, "go-agent")
	ctx := context.Background()

	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(tools.Tools) < 7 {
		t.Fatalf("tools/list through the proxy listed %d tools", len(tools.Tools))
	}
	if _, ok := cs.InitializeResult().Capabilities.Extensions["io.modelcontextprotocol/tasks"]; !ok {
		t.Fatal("server/discover through the proxy does not advertise the tasks extension")
	}

	cases := []struct {
		tool  string
		args  map[string]any
		want  string
		isErr bool
	}{
		{"echo", map[string]any{"text": "hi"}, "hi", false},
		{"sleep", map[string]any{"seconds": 1}, "slept", false},
		{"pipeline", map[string]any{"stages": 2}, "", false},
		{"fail", map[string]any{"mode": "tool"}, "", true},
	}
	for _, c := range cases {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: c.tool, Arguments: c.args})
		if err != nil {
			t.Fatalf("%s: %v", c.tool, err)
		}
		if res.IsError != c.isErr || !strings.Contains(text(t, res), c.want) {
			t.Fatalf("%s: got isError=%v %q, want isError=%v containing %q", c.tool, res.IsError, text(t, res), c.isErr, c.want)
		}
	}
	// A JSON-RPC failure of the task is the agent's error.
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fail", Arguments: map[string]any{"mode": "error"}}); err == nil {
		t.Fatal("fail mode=error completed through the proxy")
	}
	list, err := r.eng.List(ctx, deck.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != len(cases)+1 {
		t.Fatalf("%d records for %d calls", len(list), len(cases)+1)
	}
	for _, e := range list {
		if e.Task.Agent != "go-agent" || !e.Task.Status.Terminal() {
			t.Fatalf("record %s: agent %q status %s", e.Task.Tool, e.Task.Agent, e.Task.Status)
		}
	}
}

// An input request of a held call is the operator's: the agent's call
// blocks until it is answered through the Deck, then gets the result.
func TestHoldInputAnsweredByOperator(t *testing.T) {
	r := startRig(t, demo.Options{}, Options{})
	cs := goClient(t, r.url, "go-agent")
	for _, c := range []struct {
		tool    string
		args    map[string]any
		answers func(rec *model.Task) map[string]json.RawMessage
		want    string
	}{
		{"approve", map[string]any{"action": "deploy"}, func(rec *model.Task) map[string]json.RawMessage {
			return map[string]json.RawMessage{rec.PendingInputs()[0]: json.RawMessage(`{"action":"accept","content":{"approve":true,"reason":"tests pass"}}`)}
		}, "approved deploy: tests pass"},
		{"confirm_first", nil, func(rec *model.Task) map[string]json.RawMessage {
			return map[string]json.RawMessage{"confirm": json.RawMessage(`{"action":"accept","content":{"confirm":true}}`)}
		}, "confirmed"},
	} {
		done := make(chan *mcp.CallToolResult, 1)
		errc := make(chan error, 1)
		go func() {
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: c.tool, Arguments: c.args})
			errc <- err
			done <- res
		}()
		var rec *model.Task
		until(t, c.tool+" waiting for the operator", func() bool {
			list, err := r.eng.List(context.Background(), deck.Filter{Tool: c.tool})
			if err != nil {
				t.Fatal(err)
			}
			if len(list) == 1 && list[0].Task.Status == model.StatusInputRequired && len(list[0].Task.PendingInputs()) > 0 {
				rec = list[0].Task
				return true
			}
			return false
		})
		select {
		case <-errc:
			t.Fatalf("%s: the agent's call returned before the operator answered", c.tool)
		case <-time.After(50 * time.Millisecond):
		}
		if _, err := r.eng.Answer(context.Background(), rec.ID, c.answers(rec)); err != nil {
			t.Fatalf("%s: answer: %v", c.tool, err)
		}
		if err := <-errc; err != nil {
			t.Fatalf("%s: %v", c.tool, err)
		}
		if got := text(t, <-done); got != c.want {
			t.Fatalf("%s: the agent got %q, want %q", c.tool, got, c.want)
		}
	}
}

// A held call the operator cancels ends, for the agent, as a tool error.
func TestHoldCancelledByOperator(t *testing.T) {
	r := startRig(t, demo.Options{}, Options{})
	cs := goClient(t, r.url, "go-agent")
	type out struct {
		res *mcp.CallToolResult
		err error
	}
	done := make(chan out, 1)
	go func() {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "sleep", Arguments: map[string]any{"seconds": 600}})
		done <- out{res, err}
	}()
	rec := only(t, r.eng)
	until(t, "the task handle", func() bool {
		e, err := r.eng.Get(context.Background(), rec.ID)
		return err == nil && e.Task.TaskID != ""
	})
	if _, err := r.eng.Cancel(context.Background(), rec.ID); err != nil {
		t.Fatal(err)
	}
	o := <-done
	if o.err != nil || !o.res.IsError || !strings.Contains(text(t, o.res), "cancelled") || !strings.Contains(text(t, o.res), rec.ID) {
		t.Fatalf("the agent got %+v, %v; want a tool error that says cancelled and names %s", o.res, o.err, rec.ID)
	}
}

// The hold limit ends the agent's wait with a tool error naming the
// record and `taskdeck get`; the task goes on.
func TestHoldLimit(t *testing.T) {
	r := startRig(t, demo.Options{}, Options{HoldLimit: 200 * time.Millisecond})
	cs := goClient(t, r.url, "go-agent")
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "sleep", Arguments: map[string]any{"seconds": 600}})
	if err != nil {
		t.Fatal(err)
	}
	rec := only(t, r.eng)
	if !res.IsError || !strings.Contains(text(t, res), "taskdeck get "+rec.ID) {
		t.Fatalf("after the hold limit the agent got %q, want a tool error naming `taskdeck get %s`", text(t, res), rec.ID)
	}
	if e, _ := r.eng.Get(context.Background(), rec.ID); e.Task.Status != model.StatusWorking {
		t.Fatalf("the task is %s after the hold limit, want working", e.Task.Status)
	}
}

// An agent that hangs up mid-hold leaves the task running: the engine
// follows it to its end and keeps its result.
func TestHoldAgentHangsUp(t *testing.T) {
	r := startRig(t, demo.Options{}, Options{})
	cs := goClient(t, r.url, "go-agent")
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "sleep", Arguments: map[string]any{"seconds": 4}})
		errc <- err
	}()
	rec := only(t, r.eng)
	until(t, "the task handle", func() bool {
		e, err := r.eng.Get(context.Background(), rec.ID)
		return err == nil && e.Task.TaskID != ""
	})
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("the cancelled call returned no error")
	}
	until(t, "the task's end", func() bool {
		e, err := r.eng.Get(context.Background(), rec.ID)
		return err == nil && e.Task.Status == model.StatusCompleted && strings.Contains(string(e.Task.Result), "slept")
	})
}

// A held call of an agent that gave a progressToken reports the task's
// progress (its status messages, and a keep-alive) as
// notifications/progress, over HTTP and over stdio, then its result.
func TestHoldProgress(t *testing.T) {
	keep := keepAlive
	keepAlive = 30 * time.Millisecond
	t.Cleanup(func() { keepAlive = keep })
	r := startRig(t, demo.Options{Speed: 0.2}, Options{})
	for _, via := range []string{"http", "stdio"} {
		var mu sync.Mutex
		var got []*mcp.ProgressNotificationParams
		c := mcp.NewClient(&mcp.Implementation{Name: "go-agent", Version: "1"}, &mcp.ClientOptions{
			ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
				mu.Lock()
				got = append(got, req.Params)
				mu.Unlock()
			},
		})
		var cs *mcp.ClientSession
		if via == "http" {
			var err error
			if cs, err = c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: r.url, MaxRetries: -1, HTTPClient: &http.Client{Transport: bearer(testToken)}}, nil); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cs.Close() })
		} else {
			cs = stdioClientOf(t, r, c)
		}
		p := &mcp.CallToolParams{Name: "sleep", Arguments: map[string]any{"seconds": 2}}
		p.SetProgressToken("tok-" + via)
		res, err := cs.CallTool(context.Background(), p)
		if err != nil || !strings.Contains(text(t, res), "slept") {
			t.Fatalf("%s: %v %+v", via, err, res)
		}
		mu.Lock()
		if len(got) < 2 || got[0].ProgressToken != "tok-"+via || got[len(got)-1].Progress <= got[0].Progress || got[0].Message == "" {
			t.Fatalf("%s: progress notifications %+v", via, got)
		}
		mu.Unlock()
	}
}

// TestHeldCallWhenTheProxyStops: closing the proxy (serve stopping)
// answers a held call at once, saying the task goes on, and leaves the
// task running.
func TestHeldCallWhenTheProxyStops(t *testing.T) {
	r := startRig(t, demo.Options{}, Options{})
	cs := goClient(t, r.url, "go-agent")
	errc := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "sleep", Arguments: map[string]any{"seconds": 600}})
		errc <- err
	}()
	rec := only(t, r.eng)
	until(t, "the held task working", func() bool {
		e, err := r.eng.Get(context.Background(), rec.ID)
		return err == nil && e.Task.Status == model.StatusWorking
	})
	r.proxy.Close()
	select {
	case err := <-errc:
		if err == nil || !strings.Contains(err.Error(), "proxy is stopping; the task goes on") {
			t.Fatalf("the held call ended with %v, want that the proxy is stopping and the task goes on", err)
		}
	case <-time.After(waitfor.Scale(5 * time.Second)):
		t.Fatal("the held call was not answered when the proxy stopped")
	}
	if e, err := r.eng.Get(context.Background(), rec.ID); err != nil || e.Task.Status != model.StatusWorking {
		t.Fatalf("after the proxy stopped the task is %+v (%v), want it still working", e.Task, err)
	}
}
