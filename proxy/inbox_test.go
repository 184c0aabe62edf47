package proxy

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/model"
)

// waitingApprove starts the demo's approve on r's engine, on server (by
// default "demo"), and waits until it asks for its answer; it returns the
// record's id.
func waitingApprove(t *testing.T, r *rig, server ...string) string {
	t.Helper()
	ctx := context.Background()
	res, err := r.eng.Call(ctx, deck.CallRequest{Server: model.ServerRef{Name: append(server, "demo")[0]}, Tool: "approve", Args: json.RawMessage(`{"action":"deploy"}`)})
	if err != nil {
		t.Fatal(err)
	}
	id := res.Task.ID
	until(t, "approve waits for its answer", func() bool {
		e, err := r.eng.Get(ctx, id)
		return err == nil && e.Task.WaitsForInput()
	})
	return id
}

// inboxClient is go-sdk's client at the inbox, with token.
func inboxClient(t *testing.T, r *rig, token string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "inbox-test", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: r.base + InboxPath, MaxRetries: -1,
		HTTPClient: &http.Client{Transport: bearer(token)}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// callInbox calls one of the inbox's tools; it returns the tool's text
// and whether it is a tool error.
func callInbox(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) (string, bool) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	var text []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text = append(text, tc.Text)
		}
	}
	return strings.Join(text, "\n"), res.IsError
}

// Only a principal with the operator role reaches the inbox: an agent's
// and a viewer's tokens are 403, no token is 401, and the operator's token
// from a web page (its Origin) or a rebound name (its Host) is 403, each
// before any tool runs, and the waiting task stays unanswered.
func TestInboxOperatorsOnly(t *testing.T) {
	r, logs := twoAgents(t)
	id := waitingApprove(t, r)
	list := `{"name":"inbox_list","arguments":{}}`
	for _, c := range []struct {
		who    string
		hdr    map[string]string
		status int
	}{{"agent a", as(tokenA), http.StatusForbidden}, {"viewer v", as(tokenV), http.StatusForbidden}, {"no token", map[string]string{"Authorization": ""}, http.StatusUnauthorized},
		{"a web page with the operator's token", map[string]string{"Authorization": "Bearer " + tokenO, "Origin": "https://evil.example"}, http.StatusForbidden},
		{"a rebound name with the operator's token", map[string]string{"Authorization": "Bearer " + tokenO, "Host": "evil.example"}, http.StatusForbidden}} {
		status, a := rpc(t, r.base+InboxPath, "tools/call", list, c.hdr)
		if status != c.status || a.Error == nil {
			t.Fatalf("%s at the inbox: HTTP %d %+v, want %d", c.who, status, a, c.status)
		}
		if strings.Contains(a.Error.Message, id) {
			t.Fatalf("%s was told of the task: %s", c.who, a.Error.Message)
		}
	}
	if !strings.Contains(logs.String(), "operator role") {
		t.Fatalf("no log line of the refusals:\n%s", logs)
	}
	e, err := r.eng.Get(context.Background(), id)
	if err != nil || !e.Task.WaitsForInput() {
		t.Fatalf("the task after the refusals: %+v %v; want it waiting", e.Task, err)
	}
}

// The operator lists, shows and answers through the inbox: an answer the
// form refuses says which field and why and is not sent; the good one is
// recorded as the operator's and the task completes; answering the same
// key again is refused, naming the answer taken and who gave it.
func TestInboxAnswerAndRefusals(t *testing.T) {
	r, _ := twoAgents(t)
	id := waitingApprove(t, r)
	cs := inboxClient(t, r, tokenO)

	text, isErr := callInbox(t, cs, "inbox_list", nil)
	var list inboxListOut
	if isErr || json.Unmarshal([]byte(text), &list) != nil || len(list.Waiting) != 1 {
		t.Fatalf("inbox_list: %s (error %v)", text, isErr)
	}
	it := list.Waiting[0]
	if it.Task != id || it.Server != "demo" || it.Tool != "approve" || len(it.Questions) != 1 || it.Questions[0].Key != "approve-1" || it.Questions[0].Message != "Approve deploy?" {
		t.Fatalf("inbox_list gave %+v", it)
	}

	text, isErr = callInbox(t, cs, "inbox_show", map[string]any{"task": id})
	var show inboxShowOut
	if isErr || json.Unmarshal([]byte(text), &show) != nil || len(show.Questions) != 1 || !strings.Contains(text, `"schema":{"properties":{"approve":`) {
		t.Fatalf("inbox_show: %s (error %v)", text, isErr)
	}

	text, isErr = callInbox(t, cs, "inbox_answer", map[string]any{"task": id, "key": "approve-1", "content": map[string]any{"approve": "yes", "reason": "ok"}})
	if !isErr || !strings.Contains(text, "approve") || !strings.Contains(text, "approve: must be true or false") {
		t.Fatalf("an answer the form refuses: %q (error %v); want the field and why", text, isErr)
	}
	if e, _ := r.eng.Get(context.Background(), id); len(e.Task.Answers) != 0 {
		t.Fatalf("the refused answer was recorded: %+v", e.Task.Answers)
	}

	text, isErr = callInbox(t, cs, "inbox_answer", map[string]any{"task": id, "key": "approve-1", "content": map[string]any{"approve": true, "reason": "inbox says yes"}})
	if isErr {
		t.Fatalf("inbox_answer: %s", text)
	}
	until(t, "the task completes", func() bool {
		e, err := r.eng.Get(context.Background(), id)
		return err == nil && e.Task.Status == model.StatusCompleted
	})
	e, _ := r.eng.Get(context.Background(), id)
	if w, ok := e.Task.LastAnswer("approve-1"); !ok || w.By.Name != "o" || w.By.Role != model.RoleOperator {
		t.Fatalf("the answer was recorded as %+v; want the operator o", w)
	}
	if !strings.Contains(string(e.Task.Result), "approved deploy: inbox says yes") {
		t.Fatalf("result %s", e.Task.Result)
	}

	text, isErr = callInbox(t, cs, "inbox_answer", map[string]any{"task": id, "key": "approve-1", "action": "decline"})
	if !isErr || !strings.Contains(text, `"approve-1"`) || !strings.Contains(text, "inbox says yes") || !strings.Contains(text, "by o") {
		t.Fatalf("a stale key: %q (error %v); want a refusal naming the answer and o", text, isErr)
	}

	text, isErr = callInbox(t, cs, "task_status", map[string]any{"task": id})
	if isErr || !strings.Contains(text, `"status":"completed"`) || !strings.Contains(text, `"by":"o"`) {
		t.Fatalf("task_status: %s", text)
	}
}

// An operator listed on some servers sees only their tasks: another
// server's waiting task is not in its inbox, and showing, answering or
// asking its status answers as for an id that does not exist.
func TestInboxOperatorsServersOnly(t *testing.T) {
	r, _ := twoAgents(t)
	other := waitingApprove(t, r, "other")
	cs := inboxClient(t, r, tokenO)
	if text, _ := callInbox(t, cs, "inbox_list", nil); strings.Contains(text, other) {
		t.Fatalf("operator o (on demo) listed the task of other: %s", text)
	}
	unknown, _ := callInbox(t, cs, "task_status", map[string]any{"task": "zz" + other[2:]})
	for tool, args := range map[string]map[string]any{"inbox_show": {"task": other}, "task_status": {"task": other},
		"inbox_answer": {"task": other, "key": "approve-1", "action": "decline"}} {
		if tool == "task_status" {
			// A prefix of its own server's task is as unknown too.
			mine := waitingApprove(t, r)
			if text, isErr := callInbox(t, cs, tool, map[string]any{"task": mine[:6]}); !isErr || !strings.Contains(text, "no task") {
				t.Fatalf("task_status of a prefix: %q (error %v); want it unknown", text, isErr)
			}
		}
		text, isErr := callInbox(t, cs, tool, args)
		if want := strings.ReplaceAll(unknown, "zz"+other[2:], other); !isErr || text != want {
			t.Fatalf("%s of another server's task: %q (error %v); want as unknown: %q", tool, text, isErr, want)
		}
	}
	if e, _ := r.eng.Get(context.Background(), other); !e.Task.WaitsForInput() {
		t.Fatalf("the other server's task was answered: %+v", e.Task)
	}
}
