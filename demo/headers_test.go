package demo

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestParamHeadersAreChecked: a tools/call of the deploy tool must carry
// each x-mcp-header argument as its Mcp-Param-* header (SEP-2243): a
// missing, different or unexpected header is refused with 400 and -32020
// before any task exists; the right ones (base64 for non-ASCII) run it.
func TestParamHeadersAreChecked(t *testing.T) {
	e := newEnv(t, Options{})
	c := e.client(t, true)
	tools := c.ok("tools/list", nil)["tools"].([]any)
	annotated := map[string]any{}
	for _, tl := range tools {
		if m := tl.(map[string]any); m["name"] == "deploy" {
			for arg, p := range m["inputSchema"].(map[string]any)["properties"].(map[string]any) {
				annotated[arg] = p.(map[string]any)["x-mcp-header"]
			}
		}
	}
	if annotated["region"] != "Region" || annotated["priority"] != "Priority" {
		t.Fatalf("deploy's schema does not annotate its arguments: %v", annotated)
	}

	post := func(args map[string]any, headers map[string]string) response {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call",
			"params": map[string]any{"name": "deploy", "arguments": args, "_meta": c.meta()}})
		h := http.Header{"Mcp-Method": {"tools/call"}, "Mcp-Name": {"deploy"}}
		for k, v := range headers {
			h.Set(k, v)
		}
		return e.http.roundTrip(t, h, body)
	}
	args := map[string]any{"region": "eu-west-1", "priority": 3}
	for name, headers := range map[string]map[string]string{
		"no headers":         nil,
		"priority missing":   {"Mcp-Param-Region": "eu-west-1"},
		"region differs":     {"Mcp-Param-Region": "us-east-1", "Mcp-Param-Priority": "3"},
		"priority differs":   {"Mcp-Param-Region": "eu-west-1", "Mcp-Param-Priority": "4"},
		"base64 of another":  {"Mcp-Param-Region": "=?base64?" + b64("us-east-1") + "?=", "Mcp-Param-Priority": "3"},
		"header for nothing": {"Mcp-Param-Region": "eu-west-1", "Mcp-Param-Priority": "3", "Mcp-Param-Other": "x"},
	} {
		r := post(args, headers)
		if name == "header for nothing" {
			// Headers no argument names are not the server's business.
			if r.Error != nil {
				t.Errorf("%s: %s", name, r.Raw)
			}
			continue
		}
		if r.Status != http.StatusBadRequest || r.Error == nil || r.Error.Code != -32020 {
			t.Errorf("%s: want 400 and -32020, got %d %s", name, r.Status, r.Raw)
		}
	}
	if created := e.srv.Stats().TasksCreated; created != 1 {
		t.Fatalf("refused calls created tasks: %d created, want the 1 accepted", created)
	}

	// An absent optional argument must come without its header.
	r := post(map[string]any{"region": "eu-west-1"}, map[string]string{"Mcp-Param-Region": "eu-west-1", "Mcp-Param-Priority": "0"})
	if r.Status != http.StatusBadRequest || r.Error == nil || r.Error.Code != -32020 {
		t.Errorf("header for an absent argument: want 400 and -32020, got %d %s", r.Status, r.Raw)
	}

	// Non-ASCII goes base64; the tool reports what it saw.
	r = post(map[string]any{"region": "zürich"}, map[string]string{"Mcp-Param-Region": "=?base64?" + b64("zürich") + "?="})
	if r.Error != nil || r.Result["resultType"] != "task" {
		t.Fatalf("right headers refused: %s", r.Raw)
	}
	done := c.waitFor(r.Result["taskId"].(string), nil, statusCompleted)
	if got := resultText(t, done["result"]); !strings.Contains(got, "deployed to zürich") || !strings.Contains(got, "Mcp-Param-Region=="+"?base64?"+b64("zürich")+"?=") {
		t.Fatalf("result %q", got)
	}
}
