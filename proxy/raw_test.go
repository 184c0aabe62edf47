package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
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
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
		}
		req.Header.Set(k, v)
		if v == "" {
			req.Header.Del(k) // "": the request goes without it
		}
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
	cases := []struct {
		name, url, body string
		status          int
		code            int64
		says            string
	}{
		{"not JSON", r.url, `{"jsonrpc":`, 400, -32700, "not valid JSON"},
		{"a batch", r.url, `[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]`, 400, -32600, "batch"},
		{"not 2.0", r.url, `{"jsonrpc":"1.0","id":1,"method":"tools/list"}`, 400, -32600, `"2.0"`},
		{"no method", r.url, `{"jsonrpc":"2.0","id":1}`, 400, -32600, "method"},
		{"unknown server", r.base + "/mcp/nosuch", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, 404, -32600, `no server "nosuch"`},
		{"no endpoint", r.base + "/other", `{}`, 404, -32600, "/mcp/<server>"},
		{"too large", r.url, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"` + strings.Repeat("x", 2<<10) + `"}}}`, 413, -32600, "larger than"},
		{"a call without an id", r.url, `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"sleep","arguments":{"seconds":1}}}`, 400, -32600, "need an id"},
		{"tasks/get without an id", r.url, `{"jsonrpc":"2.0","method":"tasks/get","params":{"taskId":"x"}}`, 400, -32600, "need an id"},
		{"no tool name", r.url, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}`, 200, -32602, "name"},
		{"_meta not an object", r.url, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","_meta":5}}`, 200, -32602, `"_meta" (an object)`},
		{"tasks/get _meta not an object", r.url, `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"x","_meta":[]}}`, 200, -32602, `"_meta" (an object)`},
	}
	for _, c := range cases {
		status, a := post(t, c.url, c.body, "tools/call", nil)
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
