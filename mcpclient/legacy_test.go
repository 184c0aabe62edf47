package mcpclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/internal/nodetest"
	"github.com/taskdeck/taskdeck/internal/waitfor"
	"github.com/taskdeck/taskdeck/mcpclient"
	"github.com/taskdeck/taskdeck/mcpclient/config"
	"github.com/taskdeck/taskdeck/mcpclient/legacy"
	"github.com/taskdeck/taskdeck/model"
)

// everythingStdio is a pool whose server "everything" is server-everything
// over stdio.
func everythingStdio(t *testing.T, pin string) *mcpclient.Pool {
	t.Helper()
	entry := map[string]any{"command": "node", "args": []string{nodetest.LegacyServers(t).Everything(), "stdio"}}
	if pin != "" {
		entry["protocol"] = pin
	}
	return legacyPool(t, entry)
}

func legacyPool(t *testing.T, entry map[string]any) *mcpclient.Pool {
	t.Helper()
	src, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"everything": entry}})
	cfg, err := config.ParseConfig("test.json", src)
	if err != nil {
		t.Fatal(err)
	}
	pool := mcpclient.NewPool(mcpclient.PoolOptions{Config: cfg})
	t.Cleanup(pool.Close)
	return pool
}

// pollUntil polls a task until cond holds of its snapshot.
func pollUntil(t *testing.T, s *mcpclient.Session, id, what string, cond func(*model.Snapshot) bool) *model.Snapshot {
	t.Helper()
	var last *model.Snapshot
	waitfor.Within(t, 30*time.Second, what, func() bool {
		snap, err := s.GetTask(context.Background(), id)
		if err != nil {
			t.Fatalf("tasks/get: %v", err)
		}
		last = snap
		return cond(snap)
	})
	return last
}

// The reference server of the 2025-11-25 revision, installed from npm:
// taskdeck negotiates the sessioned revision with it (2026-07-28 first,
// or pinned), calls its task-required research tool as a task, polls it
// to input_required, holds the server's elicitation/create (carried on
// tasks/result) as the task's input request, answers it, and fetches the
// result, which says what was answered. Over stdio and HTTP.
func TestLegacyEverythingResearchWithQuestion(t *testing.T) {
	for _, c := range []struct{ name, pin string }{{"stdio negotiated", ""}, {"stdio pinned", legacy.ProtocolVersion}, {"http negotiated", "http"}} {
		t.Run(c.name, func(t *testing.T) {
			var pool *mcpclient.Pool
			if c.pin == "http" {
				url, _ := nodetest.LegacyServers(t).ServeEverything(t, "0")
				pool = legacyPool(t, map[string]any{"url": url})
			} else {
				pool = everythingStdio(t, c.pin)
			}
			ctx := context.Background()
			s, err := pool.Session(ctx, model.ServerRef{Name: "everything"})
			if err != nil {
				t.Fatal(err)
			}
			if s.Protocol != legacy.ProtocolVersion || !s.SupportsTasks {
				t.Fatalf("negotiated %q, tasks %v; want %s with tasks", s.Protocol, s.SupportsTasks, legacy.ProtocolVersion)
			}
			out, err := s.CallTool(ctx, "simulate-research-query", json.RawMessage(`{"topic":"python","ambiguous":true}`), nil, "")
			if err != nil {
				t.Fatal(err)
			}
			if out.Task == nil {
				t.Fatalf("want a task handle, got %s", out.Result)
			}
			id := out.Task.TaskID
			asked := pollUntil(t, s, id, "the question", func(s *model.Snapshot) bool { return len(s.InputRequests) > 0 })
			if asked.Status != model.StatusInputRequired {
				t.Fatalf("status %s with a question; want input_required", asked.Status)
			}
			var key string
			for k, r := range asked.InputRequests {
				key = k
				if r.Method != "elicitation/create" || !strings.Contains(string(r.Params), "interpretation") {
					t.Fatalf("input request %s: %s %s", k, r.Method, r.Params)
				}
			}
			if err := s.UpdateTask(ctx, id, map[string]json.RawMessage{key: json.RawMessage(`{"action":"accept","content":{"interpretation":"snake"}}`)}); err != nil {
				t.Fatal(err)
			}
			done := pollUntil(t, s, id, "the end", func(s *model.Snapshot) bool { return s.Status.Terminal() })
			if done.Status != model.StatusCompleted || !strings.Contains(string(done.Result), "Clarification**: snake") {
				t.Fatalf("ended %s with %.300s; want completed with the answer in the report", done.Status, done.Result)
			}
			// A tool that forbids tasks is called synchronously.
			out, err = s.CallTool(ctx, "echo", json.RawMessage(`{"message":"hi"}`), nil, "")
			if err != nil || out.Task != nil || !strings.Contains(string(out.Result), "hi") {
				t.Fatalf("echo: %v %+v", err, out)
			}
		})
	}
}

// An answer to a question no longer held (the session that carried it
// ended) is refused with the reason, and nothing is sent.
func TestLegacyAnswerToAQuestionNotHeld(t *testing.T) {
	s, err := everythingStdio(t, "").Session(context.Background(), model.ServerRef{Name: "everything"})
	if err != nil {
		t.Fatal(err)
	}
	out, err := s.CallTool(context.Background(), "simulate-research-query", json.RawMessage(`{"topic":"x"}`), nil, "")
	if err != nil || out.Task == nil {
		t.Fatalf("call: %v %+v", err, out)
	}
	err = s.UpdateTask(context.Background(), out.Task.TaskID, map[string]json.RawMessage{"elicit-gone": json.RawMessage(`{"action":"decline"}`)})
	if err != mcpclient.ErrQuestionGone {
		t.Fatalf("answer to a question not held: %v; want ErrQuestionGone", err)
	}
}

// server-everything binds a task to the session that made it: a new
// session (taskdeck restarted) is told "not found", which taskdeck words
// as that, not as an expired task. A restarted server answers the old
// session id with 404: the session is dropped, the next connects anew
// (initialize again), and the task it cannot see is reported the same way.
func TestLegacySessionLost(t *testing.T) {
	servers := nodetest.LegacyServers(t)
	url, cmd := servers.ServeEverything(t, "0")
	ctx := context.Background()
	ref := model.ServerRef{Name: "everything"}
	first := legacyPool(t, map[string]any{"url": url})
	s, err := first.Session(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	out, err := s.CallTool(ctx, "simulate-research-query", json.RawMessage(`{"topic":"tides"}`), nil, "")
	if err != nil || out.Task == nil {
		t.Fatalf("call: %v %+v", err, out)
	}
	id := out.Task.TaskID
	if _, err := s.GetTask(ctx, id); err != nil {
		t.Fatalf("the session that made it: %v", err)
	}
	first.Close() // taskdeck exits

	second := legacyPool(t, map[string]any{"url": url})
	s, err = second.Session(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	var gone *mcpclient.TaskGoneError
	if _, err := s.GetTask(ctx, id); !errors.Is(err, mcpclient.ErrTaskUnknown) || !errors.As(err, &gone) || gone.Why != mcpclient.WhySessionBound {
		t.Fatalf("another session's task: %v; want unknown, bound to its session", err)
	}

	// The server restarts on the same port: the session id is unknown there.
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	servers.ServeEverything(t, strings.TrimSuffix(strings.TrimPrefix(url, "http://127.0.0.1:"), "/mcp"))
	_, err = s.GetTask(ctx, id)
	var te *mcpclient.TransportError
	if !errors.As(err, &te) || te.Transient {
		t.Fatalf("on the restarted server's 404: %v; want a transport error that ends the session", err)
	}
	second.Drop(s)
	s, err = second.Session(ctx, ref)
	if err != nil {
		t.Fatalf("initialize again: %v", err)
	}
	if _, err := s.GetTask(ctx, id); !errors.As(err, &gone) {
		t.Fatalf("after the restart: %v; want unknown, bound to its session", err)
	}
}

// A server on the TypeScript SDK 1.x's own task store: an optional-task
// tool is called as a task (and its result fetched with tasks/result), a
// failed task ends failed with the server's word, and a tool that forbids
// tasks is called synchronously.
func TestLegacySDKServer(t *testing.T) {
	pool := legacyPool(t, map[string]any{"command": "node", "args": []string{nodetest.LegacyServers(t).SDKServer()}})
	ctx := context.Background()
	s, err := pool.Session(ctx, model.ServerRef{Name: "everything"})
	if err != nil {
		t.Fatal(err)
	}
	if s.Protocol != legacy.ProtocolVersion || s.ServerName != "taskdeck-sdk1-test" {
		t.Fatalf("session %s %s", s.Protocol, s.ServerName)
	}
	out, err := s.CallTool(ctx, "square", json.RawMessage(`{"n":7}`), nil, "")
	if err != nil || out.Task == nil {
		t.Fatalf("optional task: %v %+v", err, out)
	}
	if done := pollUntil(t, s, out.Task.TaskID, "the square", func(s *model.Snapshot) bool { return s.Status.Terminal() }); done.Status != model.StatusCompleted || !strings.Contains(string(done.Result), `"49"`) {
		t.Fatalf("square: %s %s", done.Status, done.Result)
	}
	out, err = s.CallTool(ctx, "square", json.RawMessage(`{"n":3,"fail":true}`), nil, "")
	if err != nil || out.Task == nil {
		t.Fatalf("failing task: %v %+v", err, out)
	}
	if done := pollUntil(t, s, out.Task.TaskID, "the failure", func(s *model.Snapshot) bool { return s.Status.Terminal() }); done.Status != model.StatusFailed || done.Error == nil || !strings.Contains(string(done.Error.Data), "cannot square 3") {
		t.Fatalf("failed task: %s %+v", done.Status, done.Error)
	}
	out, err = s.CallTool(ctx, "hello", json.RawMessage(`{"name":"deck"}`), nil, "")
	if err != nil || out.Task != nil || !strings.Contains(string(out.Result), "hello deck") {
		t.Fatalf("hello: %v %+v", err, out)
	}
}

// tasks/list is bounded: a server on the TypeScript SDK 1.x whose listing
// never ends (empty pages, each with a new cursor) is followed for
// MaxListPages pages, one that lists 500 tasks a page for MaxListTasks
// tasks; each is an error naming the bound, not a partial list.
func TestLegacyListBounded(t *testing.T) {
	program := nodetest.LegacyServers(t).SDKServer()
	for mode, want := range map[string]string{
		"endless": "ran past 100 pages",
		"flood":   "listed more than 10000 tasks",
	} {
		t.Run(mode, func(t *testing.T) {
			pool := legacyPool(t, map[string]any{"command": "node", "args": []string{program}, "env": map[string]string{"TASKDECK_TEST_LIST": mode}})
			ctx, cancel := context.WithTimeout(context.Background(), waitfor.Scale(60*time.Second))
			defer cancel()
			s, err := pool.Session(ctx, model.ServerRef{Name: "everything"})
			if err != nil {
				t.Fatal(err)
			}
			tasks, err := s.ListTasks(ctx)
			if err == nil || !strings.Contains(err.Error(), want) || tasks != nil {
				t.Fatalf("ListTasks: %d tasks, %v; want the error %q", len(tasks), err, want)
			}
		})
	}
}
