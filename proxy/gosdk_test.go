package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

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
