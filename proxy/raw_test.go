package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/internal/hostile"
	"github.com/taskdeck/taskdeck/model"
)

// answer is a JSON-RPC answer as an agent reads it.
type answer struct {
	// ID, Method and Params are set on a request to the agent.
	ID     json.RawMessage            `json:"id"`
	Method string                     `json:"method"`
	Params json.RawMessage            `json:"params"`
	Result map[string]json.RawMessage `json:"result"`
	Error  *struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// metaJSON is a request's _meta; tasks declares the extension.
func metaJSON(agent string, tasks bool) string {
	caps := `{}`
	if tasks {
		caps = `{"extensions":{"io.modelcontextprotocol/tasks":{}}}`
	}
	return fmt.Sprintf(`{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":%q,"version":"1"},"io.modelcontextprotocol/clientCapabilities":%s}`, agent, caps)
}

// rpc posts one JSON-RPC request as a streamable HTTP client would.
func rpc(t testing.TB, url, method, params string, hdr map[string]string) (int, answer) {
	t.Helper()
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":%q,"params":%s}`, method, params)
	return post(t, url, body, method, hdr)
}

func post(t testing.TB, url, body, method string, hdr map[string]string) (int, answer) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	req.Header.Set("Authorization", "Bearer "+testToken)
	var msg struct {
		Params struct{ Name, URI, TaskID *string }
	}
	if json.Unmarshal([]byte(body), &msg) == nil {
		for _, name := range []*string{msg.Params.Name, msg.Params.URI, msg.Params.TaskID} {
			if name != nil {
				req.Header.Set("Mcp-Name", *name)
			}
		}
	}
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		if v == "" { // "": the request goes without it
			req.Header.Del(k)
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		for line := range strings.Lines(string(raw)) {
			if d, ok := strings.CutPrefix(strings.TrimSpace(line), "data:"); ok && strings.Contains(d, `"id"`) {
				raw = []byte(d)
			}
		}
	}
	var a answer
	if err := json.Unmarshal(raw, &a); err != nil {
		t.Fatalf("%s answered HTTP %d with %q: %v", method, resp.StatusCode, raw, err)
	}
	return resp.StatusCode, a
}

func str(raw json.RawMessage) string {
	var s string
	_ = json.Unmarshal(raw, &s)
	return s
}

// An agent that declares the extension gets the handle, whose taskId is
// taskdeck's record id, only once the record holds the server's task;
// tasks/get follows it to its result; the record names the agent.
func TestTasksAgentCallGetResult(t *testing.T) {
	r := startRig(t, demo.Options{}, Options{})
	_, a := rpc(t, r.url, "tools/call", `{"name":"sleep","arguments":{"seconds":1},"_meta":`+metaJSON("ts-agent", true)+`}`, nil)
	if a.Error != nil || str(a.Result["resultType"]) != "task" {
		t.Fatalf("tools/call: %+v", a)
	}
	id := str(a.Result["taskId"])
	e, err := r.eng.Get(context.Background(), id)
	if err != nil {
		t.Fatalf("the taskId the agent got is no record: %v", err)
	}
	if e.Task.TaskID == "" || e.Task.Agent != "ts-agent" {
		t.Fatalf("record: server task %q, agent %q", e.Task.TaskID, e.Task.Agent)
	}
	if e.Task.TaskID == id {
		t.Fatal("the agent sees the server's task id, not the record's")
	}
	var status string
	until(t, "completed", func() bool {
		_, a = rpc(t, r.url, "tasks/get", `{"taskId":"`+id+`","_meta":`+metaJSON("ts-agent", true)+`}`, nil)
		status = str(a.Result["status"])
		return status == "completed"
	})
	if !strings.Contains(string(a.Result["result"]), "slept") {
		t.Fatalf("completed without the result: %s", a.Result["result"])
	}
	// tasks/* without the extension declared: -32021, as a server would.
	if _, a := rpc(t, r.url, "tasks/get", `{"taskId":"`+id+`","_meta":`+metaJSON("ts-agent", false)+`}`, nil); a.Error == nil || a.Error.Code != -32021 {
		t.Fatalf("tasks/get undeclared: %+v", a)
	}
	// Another server's endpoint does not know the id; a made-up id is -32602.
	if _, a := rpc(t, r.url, "tasks/get", `{"taskId":"nope","_meta":`+metaJSON("ts-agent", true)+`}`, nil); a.Error == nil || a.Error.Code != -32602 {
		t.Fatalf("tasks/get unknown: %+v", a)
	}
}

// A tasks/get sooner than the server's pollIntervalMs is answered from the
// record: the agent polling in a loop costs the server no more polls than
// the engine makes at the server's pace.
func TestTasksGetNeverFasterThanServerAsked(t *testing.T) {
	r := startRig(t, demo.Options{PollInterval: 300 * time.Millisecond}, Options{})
	_, a := rpc(t, r.url, "tools/call", `{"name":"sleep","arguments":{"seconds":40},"_meta":`+metaJSON("a", true)+`}`, nil)
	id := str(a.Result["taskId"])
	before := len(r.srv.Requests("tasks/get"))
	start := time.Now()
	n := 0
	for time.Since(start) < 900*time.Millisecond {
		if _, a := rpc(t, r.url, "tasks/get", `{"taskId":"`+id+`","_meta":`+metaJSON("a", true)+`}`, nil); a.Error != nil {
			t.Fatal(a.Error.Message)
		}
		n++
	}
	polls := len(r.srv.Requests("tasks/get")) - before
	t.Logf("%d agent tasks/get, %d server polls", n, polls)
	// 0.9 s at 300 ms: at most 4 polls (the engine's and the proxy's together), whatever n.
	if polls > 4 || n < 20 {
		t.Fatalf("%d agent tasks/get made %d server polls in 0.9 s at pollIntervalMs 300", n, polls)
	}
}

// Input before the task exists (MRTR) maps onto NeedsInput / Continue:
// the agent gets input_required with a requestState naming the record,
// answers it, and gets the handle; in-task input goes by tasks/update;
// tasks/cancel ends a task.
func TestTasksAgentInputAndCancel(t *testing.T) {
	r := startRig(t, demo.Options{}, Options{})
	m := metaJSON("a", true)
	_, a := rpc(t, r.url, "tools/call", `{"name":"confirm_first","arguments":{},"_meta":`+m+`}`, nil)
	if str(a.Result["resultType"]) != "input_required" || !strings.Contains(string(a.Result["inputRequests"]), "confirm") {
		t.Fatalf("confirm_first: %+v", a)
	}
	state := str(a.Result["requestState"])
	_, a = rpc(t, r.url, "tools/call", `{"name":"confirm_first","arguments":{},"requestState":"`+state+`","inputResponses":{"confirm":{"action":"accept","content":{"confirm":true}}},"_meta":`+m+`}`, nil)
	if str(a.Result["resultType"]) != "task" {
		t.Fatalf("confirm_first answered: %+v", a)
	}
	if list, _ := r.eng.List(context.Background(), deck.Filter{}); len(list) != 1 {
		t.Fatalf("%d records for one MRTR call", len(list))
	}

	_, a = rpc(t, r.url, "tools/call", `{"name":"approve","arguments":{"action":"ship"},"_meta":`+m+`}`, nil)
	id := str(a.Result["taskId"])
	until(t, "input_required", func() bool {
		_, a = rpc(t, r.url, "tasks/get", `{"taskId":"`+id+`","_meta":`+m+`}`, nil)
		return str(a.Result["status"]) == "input_required"
	})
	var reqs map[string]json.RawMessage
	_ = json.Unmarshal(a.Result["inputRequests"], &reqs)
	var key string
	for k := range reqs {
		key = k
	}
	if _, a := rpc(t, r.url, "tasks/update", `{"taskId":"`+id+`","inputResponses":{"`+key+`":{"action":"accept","content":{"approve":true,"reason":"ok"}}},"_meta":`+m+`}`, nil); a.Error != nil {
		t.Fatal(a.Error.Message)
	}
	until(t, "approved", func() bool {
		_, a = rpc(t, r.url, "tasks/get", `{"taskId":"`+id+`","_meta":`+m+`}`, nil)
		return strings.Contains(string(a.Result["result"]), "approved ship: ok")
	})

	_, a = rpc(t, r.url, "tools/call", `{"name":"sleep","arguments":{"seconds":600},"_meta":`+m+`}`, nil)
	id = str(a.Result["taskId"])
	if _, a := rpc(t, r.url, "tasks/cancel", `{"taskId":"`+id+`","_meta":`+m+`}`, nil); a.Error != nil {
		t.Fatal(a.Error.Message)
	}
	until(t, "cancelled", func() bool {
		e, err := r.eng.Get(context.Background(), id)
		return err == nil && e.Task.Status == model.StatusCancelled
	})
}

// Bad input gets a JSON-RPC error that says what was wrong, and writes
// nothing.
func TestBadInput(t *testing.T) {
	r := startRig(t, demo.Options{}, Options{MaxBody: 1 << 10})
	meta := metaJSON("bad", true)
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"},"_meta":` + meta + `}}`
	cases := []struct {
		name, url, body string
		status          int
		code            int64
		says            string
		hdr             map[string]string
	}{
		{"not JSON", r.url, `{"jsonrpc":`, 400, -32700, "not valid JSON", nil},
		{"a batch", r.url, `[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]`, 400, -32600, "batch", nil},
		{"not 2.0", r.url, `{"jsonrpc":"1.0","id":1,"method":"tools/list"}`, 400, -32600, `"2.0"`, nil},
		{"no method", r.url, `{"jsonrpc":"2.0","id":1}`, 400, -32600, "method", nil},
		{"unknown server", r.base + "/mcp/nosuch", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, 404, -32600, `no server "nosuch"`, nil},
		{"no endpoint", r.base + "/other", `{}`, 404, -32600, "/mcp/<server>", nil},
		{"too large", r.url, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"` + strings.Repeat("x", 2<<10) + `"}}}`, 413, -32600, "larger than", nil},
		{"a call without an id", r.url, `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"sleep","arguments":{"seconds":1}}}`, 400, -32600, "need an id", nil},
		{"tasks/get without an id", r.url, `{"jsonrpc":"2.0","method":"tasks/get","params":{"taskId":"x"}}`, 400, -32600, "need an id", nil},
		{"no tool name", r.url, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":` + meta + `}}`, 400, -32602, "name", nil},
		{"_meta not an object", r.url, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","_meta":5}}`, 400, -32602, `_meta field "io.modelcontextprotocol/protocolVersion"`, nil},
		{"tasks/get _meta not an object", r.url, `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"x","_meta":[]}}`, 400, -32602, `_meta field "io.modelcontextprotocol/protocolVersion"`, nil},
		// What a 2026-07-28 server refuses before anything runs.
		{"tools/call without _meta", r.url, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`, 400, -32602, `_meta field "io.modelcontextprotocol/protocolVersion"`, nil},
		{"no clientCapabilities", r.url, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`, 400, -32602, `_meta field "io.modelcontextprotocol/clientCapabilities"`, nil},
		{"_meta version differs", r.url, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25","io.modelcontextprotocol/clientCapabilities":{}}}}`, 400, -32020, `Mcp-Protocol-Version "2026-07-28" differs`, nil},
		{"Mcp-Name differs", r.url, call, 400, -32020, `Mcp-Name "sleep" differs from params.name "echo"`, map[string]string{"Mcp-Name": "sleep"}},
		{"no Mcp-Name", r.url, call, 400, -32020, "send the Mcp-Name header", map[string]string{"Mcp-Name": ""}},
		{"Mcp-Method differs", r.url, call, 400, -32020, `Mcp-Method "tools/list" differs`, map[string]string{"Mcp-Method": "tools/list"}},
		{"no Mcp-Method", r.url, call, 400, -32020, "send the Mcp-Method header", map[string]string{"Mcp-Method": ""}},
		{"tasks/get Mcp-Name differs", r.url, `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"a","_meta":` + meta + `}}`, 400, -32020, `differs from params.taskId "a"`, map[string]string{"Mcp-Name": "b"}},
		{"Mcp-Name differs on a relayed method", r.url, `{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"a","_meta":` + meta + `}}`, 400, -32020, `differs from params.name "a"`, map[string]string{"Mcp-Name": "b"}},
	}
	for _, c := range cases {
		var m struct{ Method string }
		_ = json.Unmarshal([]byte(c.body), &m)
		status, a := post(t, c.url, c.body, m.Method, c.hdr)
		if status != c.status || a.Error == nil || a.Error.Code != c.code || !strings.Contains(a.Error.Message, c.says) || strings.Contains(a.Error.Message, "\n") {
			t.Errorf("%s: HTTP %d %+v; want %d, code %d saying %q in one line", c.name, status, a.Error, c.status, c.code, c.says)
		}
	}
	if list, _ := r.eng.List(context.Background(), deck.Filter{}); len(list) != 0 {
		t.Fatalf("bad input left %d records", len(list))
	}
	if n := len(r.srv.Requests("")); n != 0 {
		t.Fatalf("bad input reached the server %d times", n)
	}
}

// An upstream that is down: a JSON-RPC error naming the server, for a
// relayed request and for a call, and nothing recorded.
func TestUpstreamDown(t *testing.T) {
	r := startRig(t, demo.Options{}, Options{})
	r.srv.On("*", func(w http.ResponseWriter, _ *hostile.Request) bool {
		hj, _ := w.(http.Hijacker)
		conn, _, _ := hj.Hijack()
		conn.Close() // the connection drops: the server is gone
		return true
	})
	for _, m := range []string{"tools/list", "tools/call", "server/discover"} {
		status, a := rpc(t, r.url, m, `{"name":"sleep","arguments":{"seconds":1},"_meta":`+metaJSON("a", true)+`}`, nil)
		if status != 200 || a.Error == nil || !strings.Contains(a.Error.Message, "demo") {
			t.Errorf("%s with the server down: HTTP %d %+v", m, status, a.Error)
		}
	}
	if list, _ := r.eng.List(context.Background(), deck.Filter{}); len(list) != 0 {
		t.Fatalf("a call to a server that is down left %d records", len(list))
	}
}

// The config's headers go to the server; the agent's cookies do not,
// unless the config says forwardAgentCredentials; its Authorization (its
// token at the proxy) never does.
func TestCredentials(t *testing.T) {
	for _, forward := range []bool{false, true} {
		srv := hostile.Start(t, demo.Options{Speed: 0.05})
		r := startRigWith(t, srv, fmt.Sprintf(`{"mcpServers":{"demo":{"url":%q,"headers":{"X-Api-Key":"${PROXY_TEST_KEY}"},"forwardAgentCredentials":%v}}}`, srv.URL, forward),
			Options{Lookup: func(k string) (string, bool) { return "k-123", k == "PROXY_TEST_KEY" }})
		rpc(t, r.url, "tools/list", `{"_meta":`+metaJSON("a", false)+`}`, map[string]string{"Cookie": "s=1"})
		seen := srv.Requests("tools/list")
		if len(seen) != 1 {
			t.Fatalf("tools/list reached the server %d times", len(seen))
		}
		h := seen[0].Header
		if h.Get("X-Api-Key") != "k-123" {
			t.Fatalf("the config's header did not reach the server: %q", h.Get("X-Api-Key"))
		}
		if got := h.Get("Cookie") != ""; got != forward {
			t.Fatalf("forwardAgentCredentials=%v: the server saw Cookie %q", forward, h.Get("Cookie"))
		}
		// The agent's Authorization is its token at the proxy: never relayed.
		if a := h.Get("Authorization"); a != "" {
			t.Fatalf("forwardAgentCredentials=%v: the agent's proxy token reached the server: %q", forward, a)
		}
	}
}

// The operator's token is a credential beside the agents'; none is 401.
func TestToken(t *testing.T) {
	r := startRig(t, demo.Options{}, Options{Token: "t0k"})
	if status, a := rpc(t, r.url, "tools/list", `{"_meta":`+metaJSON("a", false)+`}`, map[string]string{"Authorization": ""}); status != 401 || a.Error == nil {
		t.Fatalf("no token: HTTP %d %+v", status, a.Error)
	}
	if status, a := rpc(t, r.url, "tools/list", `{"_meta":`+metaJSON("a", false)+`}`, map[string]string{"Authorization": "Bearer t0k"}); status != 200 || a.Error != nil {
		t.Fatalf("with the token: HTTP %d %+v", status, a.Error)
	}
	if n := len(r.srv.Requests("tools/list")); n != 1 {
		t.Fatalf("the server saw %d tools/list", n)
	}
	if h := r.srv.Requests("tools/list")[0].Header.Get("Authorization"); h != "" {
		t.Fatalf("the proxy's token reached the server: %q", h)
	}
}

func TestCheckListen(t *testing.T) {
	for _, c := range []struct {
		addr, token string
		ok          bool
	}{
		{"127.0.0.1:8810", "", true}, {"localhost:8810", "", true}, {"[::1]:8810", "", true},
		{"0.0.0.0:8810", "", false}, {":8810", "", false}, {"192.168.1.5:8810", "", false},
		{":8810", "secret", true}, {"nonsense", "", false},
	} {
		err := CheckListen(c.addr, c.token)
		if (err == nil) != c.ok || (err != nil && strings.Contains(err.Error(), "\n")) {
			t.Errorf("CheckListen(%q, %q) = %v", c.addr, c.token, err)
		}
	}
	if _, err := Listen("0.0.0.0:0", ""); err == nil || !strings.Contains(err.Error(), "token") {
		t.Fatalf("Listen on every interface without a token: %v", err)
	}
}

// An answer past the bound is not relayed whole: the proxy reads the
// server's answer no further than mcpclient's bound, for a relayed
// request and for server/discover, and the agent gets a short answer.
func TestUpstreamAnswerBounded(t *testing.T) {
	r := startRig(t, demo.Options{}, Options{})
	const huge = 64 << 20
	r.srv.On("tools/list", r.srv.HugeBody(huge))
	r.srv.On("server/discover", r.srv.GzipBomb(huge))
	req, _ := http.NewRequest(http.MethodPost, r.url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":`+metaJSON("a", false)+`}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if n >= huge/2 {
		t.Fatalf("the proxy relayed %d bytes of a %d-byte answer", n, huge)
	}
	if _, a := rpc(t, r.url, "server/discover", `{"_meta":`+metaJSON("a", false)+`}`, nil); a.Error == nil || !strings.Contains(a.Error.Message, "larger than") {
		t.Fatalf("server/discover with a bomb: %+v", a)
	}
}

// What a 2026-07-28 server refuses, the proxy refuses alike: the same
// request gets the same HTTP status and JSON-RPC code from both.
func TestRefusalsAsTheServer(t *testing.T) {
	r := startRig(t, demo.Options{}, Options{})
	meta := metaJSON("agent", true)
	noTasks := metaJSON("agent", false)
	v2099 := `{"io.modelcontextprotocol/protocolVersion":"2099-01-01","io.modelcontextprotocol/clientCapabilities":{}}`
	cases := []struct {
		name, method, params string
		hdr                  map[string]string
	}{
		{"discover, unsupported version", "server/discover", `{"_meta":` + v2099 + `}`, map[string]string{"Mcp-Protocol-Version": "2099-01-01"}},
		{"discover, no clientCapabilities", "server/discover", `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`, nil},
		{"discover, _meta version differs", "server/discover", `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25","io.modelcontextprotocol/clientCapabilities":{}}}`, nil},
		{"discover, no Mcp-Method", "server/discover", `{"_meta":` + meta + `}`, map[string]string{"Mcp-Method": ""}},
		{"tools/call, Mcp-Name differs", "tools/call", `{"name":"echo","arguments":{"text":"x"},"_meta":` + meta + `}`, map[string]string{"Mcp-Name": "sleep"}},
		{"tools/call, no Mcp-Name", "tools/call", `{"name":"echo","arguments":{"text":"x"},"_meta":` + meta + `}`, map[string]string{"Mcp-Name": ""}},
		{"tools/call, Mcp-Method differs", "tools/call", `{"name":"echo","arguments":{"text":"x"},"_meta":` + meta + `}`, map[string]string{"Mcp-Method": "tools/list"}},
		{"tools/call, no _meta", "tools/call", `{"name":"echo","arguments":{"text":"x"}}`, nil},
		{"tasks/get, Mcp-Name differs", "tasks/get", `{"taskId":"a","_meta":` + meta + `}`, map[string]string{"Mcp-Name": "b"}},
		{"tasks/cancel, Mcp-Method differs", "tasks/cancel", `{"taskId":"a","_meta":` + meta + `}`, map[string]string{"Mcp-Method": "tasks/get"}},
		{"tasks/get, extension not declared", "tasks/get", `{"taskId":"a","_meta":` + noTasks + `}`, nil},
		{"tasks/get, unknown task", "tasks/get", `{"taskId":"a","_meta":` + meta + `}`, nil},
		{"tasks/update, unknown task", "tasks/update", `{"taskId":"a","inputResponses":{},"_meta":` + meta + `}`, nil},
		{"unknown method", "nosuch/method", `{"_meta":` + meta + `}`, nil},
	}
	for _, c := range cases {
		ds, da := rpc(t, r.srv.URL, c.method, c.params, c.hdr)
		ps, pa := rpc(t, r.url, c.method, c.params, c.hdr)
		if da.Error == nil {
			t.Fatalf("%s: the server took it: %+v", c.name, da.Result)
		}
		if pa.Error == nil || ps != ds || pa.Error.Code != da.Error.Code {
			t.Errorf("%s: the server answers HTTP %d %d %q; the proxy HTTP %d %+v", c.name, ds, da.Error.Code, da.Error.Message, ps, pa.Error)
		}
	}
	if list, _ := r.eng.List(context.Background(), deck.Filter{}); len(list) != 0 {
		t.Fatalf("refused requests left %d records", len(list))
	}
}

// "arguments": null (go-sdk's client sends it for nil arguments) is no
// arguments: the server gets none, not a null it may refuse.
func TestNullArgumentsNotForwarded(t *testing.T) {
	r := startRig(t, demo.Options{}, Options{})
	if _, a := rpc(t, r.url, "tools/call", `{"name":"confirm_first","arguments":null,"_meta":`+metaJSON("agent", true)+`}`, nil); a.Error != nil {
		t.Fatalf("tools/call with null arguments: %+v", a.Error)
	}
	calls := r.srv.Requests("tools/call")
	if len(calls) == 0 {
		t.Fatal("the call never reached the server")
	}
	for _, c := range calls {
		var body struct {
			Params map[string]json.RawMessage `json:"params"`
		}
		if err := json.Unmarshal(c.Body, &body); err != nil {
			t.Fatal(err)
		}
		if args, ok := body.Params["arguments"]; ok && string(args) == "null" {
			t.Fatalf("the server got %s", c.Body)
		}
	}
}

// An agent's answers are the server's to judge, as without taskdeck: an
// answer with fields the form does not name goes to the server as sent
// (by MRTR and by tasks/update), and answers to keys not outstanding
// (never asked, already answered) are acknowledged and ignored, as the
// extension says a server SHOULD. The operator's answers keep the form
// check.
func TestAgentAnswersGoAsSent(t *testing.T) {
	r := startRig(t, demo.Options{}, Options{})
	m := metaJSON("a", true)
	ack := func(what, id, responses string) {
		t.Helper()
		status, a := rpc(t, r.url, "tasks/update", `{"taskId":"`+id+`","inputResponses":`+responses+`,"_meta":`+m+`}`, nil)
		if status != 200 || a.Error != nil || str(a.Result["resultType"]) != "complete" {
			t.Fatalf("%s: HTTP %d %+v, want the ack", what, status, a)
		}
	}

	_, a := rpc(t, r.url, "tools/call", `{"name":"confirm_first","arguments":{},"_meta":`+m+`}`, nil)
	state := str(a.Result["requestState"])
	_, a = rpc(t, r.url, "tools/call", `{"name":"confirm_first","arguments":{},"requestState":"`+state+`","inputResponses":{"confirm":{"action":"accept","content":{"confirm":true,"name":"extra"}},"never-asked":{"action":"accept"}},"_meta":`+m+`}`, nil)
	if a.Error != nil || str(a.Result["resultType"]) != "task" {
		t.Fatalf("confirm_first answered with an extra field: %+v %+v", a.Result, a.Error)
	}

	_, a = rpc(t, r.url, "tools/call", `{"name":"approve","arguments":{"action":"ship"},"_meta":`+m+`}`, nil)
	id := str(a.Result["taskId"])
	var key string
	until(t, "input_required", func() bool {
		_, a = rpc(t, r.url, "tasks/get", `{"taskId":"`+id+`","_meta":`+m+`}`, nil)
		var reqs map[string]json.RawMessage
		_ = json.Unmarshal(a.Result["inputRequests"], &reqs)
		for k := range reqs {
			key = k
		}
		return key != ""
	})
	// The operator's answer must fit the form.
	if _, err := r.eng.Answer(context.Background(), id, map[string]json.RawMessage{key: json.RawMessage(`{"action":"accept","content":{"approve":true,"reason":"ok","extra":1}}`)}); err == nil || !strings.Contains(err.Error(), "not a field of this form") {
		t.Fatalf("the operator's answer with an extra field: %v", err)
	}
	ack("a never-issued key", id, `{"unknown-key":{"action":"accept","content":{}}}`)
	ack("an extra field", id, `{"`+key+`":{"action":"accept","content":{"approve":true,"reason":"ok","extra":1}}}`)
	ack("the same key again", id, `{"`+key+`":{"action":"accept","content":{"approve":false,"reason":"again"}}}`)
	until(t, "approved", func() bool {
		_, a = rpc(t, r.url, "tasks/get", `{"taskId":"`+id+`","_meta":`+m+`}`, nil)
		return strings.Contains(string(a.Result["result"]), "approved ship: ok")
	})
	ack("a task that ended", id, `{"`+key+`":{"action":"accept","content":{"approve":true,"reason":"late"}}}`)

	var sent []string
	for _, req := range r.srv.Requests("") {
		if bytes.Contains(req.Body, []byte(`"extra"`)) {
			sent = append(sent, req.Method)
		}
		if bytes.Contains(req.Body, []byte("unknown-key")) || bytes.Contains(req.Body, []byte("never-asked")) || bytes.Contains(req.Body, []byte(`"again"`)) {
			t.Errorf("an answer to a key not outstanding reached the server: %s", req.Body)
		}
	}
	if !slices.Contains(sent, "tools/call") || !slices.Contains(sent, "tasks/update") {
		t.Fatalf("the answers with extra fields reached the server by %q, want tools/call and tasks/update", sent)
	}
}
