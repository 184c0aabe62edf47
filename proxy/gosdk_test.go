package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/mcpclient"
	mcpconfig "github.com/taskdeck/taskdeck/mcpclient/config"
	"github.com/taskdeck/taskdeck/model"
)

// go-sdk's client with the tasks extension (as taskdeck's own client
// drives it) through the proxy, answering with the form's fields and with
// a field the form does not name: input before the task (MRTR) and inside
// it (tasks/update) both reach the server, and each task ends as the
// server says.
func TestGoSDKClientAnswersThroughProxy(t *testing.T) {
	for _, extra := range []bool{false, true} {
		t.Run(fmt.Sprintf("extra=%v", extra), func(t *testing.T) {
			r := startRig(t, demo.Options{}, Options{})
			cfg, err := mcpconfig.ParseConfig("agent.json", fmt.Appendf(nil, `{"mcpServers":{"proxy":{"url":%q,"headers":{"Authorization":"Bearer %s"}}}}`, r.url, testToken))
			if err != nil {
				t.Fatal(err)
			}
			pool := mcpclient.NewPool(mcpclient.PoolOptions{Config: cfg})
			t.Cleanup(pool.Close)
			ctx := context.Background()
			s, err := pool.Session(ctx, model.ServerRef{Name: "proxy"})
			if err != nil {
				t.Fatal(err)
			}
			answer := func(content string) json.RawMessage {
				if extra {
					content = strings.TrimSuffix(content, "}") + `,"note":"not in the form"}`
				}
				return json.RawMessage(`{"action":"accept","content":` + content + `}`)
			}
			follow := func(taskID, key, content, want string) {
				t.Helper()
				var snap *model.Snapshot
				until(t, want, func() bool {
					if snap, err = s.GetTask(ctx, taskID); err != nil {
						t.Fatal(err)
					}
					if snap.Status == model.StatusInputRequired && key != "" {
						for k := range snap.InputRequests {
							if err := s.UpdateTask(ctx, taskID, map[string]json.RawMessage{k: answer(content)}); err != nil {
								t.Fatal(err)
							}
						}
					}
					return snap.Status.Terminal()
				})
				if snap.Status != model.StatusCompleted || !strings.Contains(string(snap.Result), want) {
					t.Fatalf("%s: %s %s %+v, want completed with %q", taskID, snap.Status, snap.Result, snap.Error, want)
				}
			}

			out, err := s.CallTool(ctx, "confirm_first", nil, nil, "")
			if err != nil || len(out.InputRequests) != 1 {
				t.Fatalf("confirm_first: %+v, %v", out, err)
			}
			out, err = s.CallTool(ctx, "confirm_first", nil, map[string]json.RawMessage{"confirm": answer(`{"confirm":true}`)}, out.RequestState)
			if err != nil || out.Task == nil {
				t.Fatalf("confirm_first answered: %+v, %v", out, err)
			}
			follow(out.Task.TaskID, "", "", "confirmed")

			out, err = s.CallTool(ctx, "approve", json.RawMessage(`{"action":"ship"}`), nil, "")
			if err != nil || out.Task == nil {
				t.Fatalf("approve: %+v, %v", out, err)
			}
			follow(out.Task.TaskID, "approve", `{"approve":true,"reason":"go says yes"}`, "approved ship: go says yes")

			if extra {
				var by []string
				for _, req := range r.srv.Requests("") {
					if strings.Contains(string(req.Body), "not in the form") {
						by = append(by, req.Method)
					}
				}
				if !slices.Contains(by, "tools/call") || !slices.Contains(by, "tasks/update") {
					t.Fatalf("the answers with an extra field reached the server by %q", by)
				}
			}
		})
	}
}

// Agent b through go-sdk's client (as an agent built on it connects, its
// token in a header): tasks/get, tasks/update and tasks/cancel of agent
// a's task fail exactly as of an unknown id, and a's task goes on.
func TestGoSDKAgentKeptApart(t *testing.T) {
	r, _ := twoAgents(t)
	idA := callAs(t, r, tokenA)
	cfg, err := mcpconfig.ParseConfig("agent.json", fmt.Appendf(nil, `{"mcpServers":{"proxy":{"url":%q,"headers":{"Authorization":"Bearer %s"}}}}`, r.url, tokenB))
	if err != nil {
		t.Fatal(err)
	}
	pool := mcpclient.NewPool(mcpclient.PoolOptions{Config: cfg})
	t.Cleanup(pool.Close)
	ctx := context.Background()
	s, err := pool.Session(ctx, model.ServerRef{Name: "proxy"})
	if err != nil {
		t.Fatal(err)
	}
	answers := map[string]json.RawMessage{"q": json.RawMessage(`{"action":"accept","content":{}}`)}
	recA, secretA, _ := strings.Cut(idA, handleSep)
	unknown := model.NewID(time.Now()) + handleSep + secretA
	for name, try := range map[string]func(id string) error{
		"tasks/get":    func(id string) error { _, err := s.GetTask(ctx, id); return err },
		"tasks/update": func(id string) error { return s.UpdateTask(ctx, id, answers) },
		"tasks/cancel": func(id string) error { return s.CancelTask(ctx, id) },
	} {
		want := try(unknown)
		if want == nil {
			t.Fatalf("%s of an unknown id passed", name)
		}
		for _, id := range []string{idA, recA} {
			if got := try(id); got == nil || got.Error() != want.Error() {
				t.Errorf("b's %s of a's task (%s): %v; of an unknown id: %v", name, id, got, want)
			}
		}
	}
	if e, _ := r.eng.Get(ctx, recA); e.Task.Status != model.StatusWorking || e.Task.CancelRequested {
		t.Fatalf("a's task after b's tries: %s (cancel requested %v)", e.Task.Status, e.Task.CancelRequested)
	}
}
