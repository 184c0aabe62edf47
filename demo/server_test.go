package demo

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/internal/waitfor"
)

func TestDiscoverAdvertisesExtension(t *testing.T) {
	e := newEnv(t, Options{})
	res := e.client(t, false).ok("server/discover", nil)
	caps := res["capabilities"].(map[string]any)
	ext, ok := caps["extensions"].(map[string]any)[extID]
	if !ok || len(ext.(map[string]any)) != 0 {
		t.Fatalf("extension not advertised as {}: %v", caps)
	}
	if _, ok := caps["tools"]; !ok {
		t.Fatalf("tools not advertised: %v", caps)
	}
	if !slices.Contains(res["supportedVersions"].([]any), any(protoVersion)) {
		t.Fatalf("supportedVersions: %v", res["supportedVersions"])
	}
}

func TestToolsHaveDescribedSchemas(t *testing.T) {
	e := newEnv(t, Options{})
	tools := e.client(t, false).ok("tools/list", nil)["tools"].([]any)
	var names []string
	for _, tl := range tools {
		m := tl.(map[string]any)
		names = append(names, m["name"].(string))
		for arg, p := range m["inputSchema"].(map[string]any)["properties"].(map[string]any) {
			if p.(map[string]any)["description"] == nil {
				t.Errorf("%s.%s has no description", m["name"], arg)
			}
		}
	}
	want := []string{"approve", "confirm_first", "deploy", "echo", "fail", InstantTool, "pipeline", "sleep", "survey"}
	if slices.Sort(names); !slices.Equal(names, want) {
		t.Fatalf("tools %v, want %v", names, want)
	}
}

func TestEchoIsDirect(t *testing.T) {
	e := newEnv(t, Options{})
	for _, tasks := range []bool{true, false} {
		res := e.client(t, tasks).tool("echo", map[string]any{"text": "hi there"})
		if res["resultType"] != "complete" || res["taskId"] != nil || resultText(t, res) != "hi there" {
			t.Fatalf("tasks=%v: %v", tasks, res)
		}
	}
}

func TestSleepCompletesWithProgress(t *testing.T) {
	e := newEnv(t, Options{})
	c := e.client(t, true)
	id := c.startTask("sleep", map[string]any{"seconds": 3})
	var msgs []string
	var last time.Time
	res := c.waitFor(id, func(m map[string]any) {
		if s, _ := m["statusMessage"].(string); s != "" && !slices.Contains(msgs, s) {
			msgs = append(msgs, s)
		}
		at, err := time.Parse(time.RFC3339Nano, m["lastUpdatedAt"].(string))
		if err != nil || at.Before(last) {
			t.Fatalf("lastUpdatedAt %v went back (was %v)", m["lastUpdatedAt"], last)
		}
		last = at
	}, "completed")
	if !slices.Contains(msgs, "slept 1 of 3 s") && !slices.Contains(msgs, "slept 2 of 3 s") {
		t.Errorf("no progress seen: %q", msgs)
	}
	r := res["result"].(map[string]any)
	if resultText(t, r) != "slept 3 s" || r["isError"] == true {
		t.Fatalf("result %v", r)
	}
	if _, ok := res["inputRequests"]; ok {
		t.Fatalf("completed task carries inputRequests: %v", res)
	}
}

func TestSleepCancelMidway(t *testing.T) {
	e := newEnv(t, Options{})
	c := e.client(t, true)
	id := c.startTask("sleep", map[string]any{"seconds": 100})
	var before map[string]any
	until(t, "a tick of progress", func() bool {
		// Any tick: on a busy machine a poll can come after the second.
		before = c.get(id)
		msg, _ := before["statusMessage"].(string)
		return strings.HasPrefix(msg, "slept ") && strings.HasSuffix(msg, " of 100 s")
	})
	ack := c.ok("tasks/cancel", map[string]any{"taskId": id})
	if ack["resultType"] != "complete" || ack["status"] != nil || ack["taskId"] != nil {
		t.Fatalf("cancel ack %v", ack)
	}
	got := c.get(id)
	if got["status"] != "cancelled" || got["result"] != nil || got["error"] != nil {
		t.Fatalf("after cancel: %v", got)
	}
	if got["lastUpdatedAt"] == before["lastUpdatedAt"] {
		t.Errorf("lastUpdatedAt did not move on cancel")
	}
	e.srv.Close() // waits for the tool to stop: nothing can change the task after this
	if again := c.get(id); again["status"] != "cancelled" || again["statusMessage"] != got["statusMessage"] {
		t.Fatalf("cancelled task changed: %v", again)
	}
	c.ok("tasks/cancel", map[string]any{"taskId": id}) // terminal: a plain ack
}

// approveInput returns the one outstanding input request of an approve task.
func approveInput(t *testing.T, c *client, id string) (string, map[string]any) {
	t.Helper()
	res := c.waitFor(id, nil, "input_required")
	reqs := res["inputRequests"].(map[string]any)
	if len(reqs) != 1 {
		t.Fatalf("want one input request, got %v", reqs)
	}
	for k, v := range reqs {
		return k, v.(map[string]any)
	}
	return "", nil
}

func TestApprove(t *testing.T) {
	e := newEnv(t, Options{})
	c := e.client(t, true)
	cases := []struct {
		name    string
		answer  map[string]any
		text    string
		isError bool
	}{
		{"accept", map[string]any{"action": "accept", "content": map[string]any{"approve": true, "reason": "looks fine"}}, "approved deploy: looks fine", false},
		{"reject", map[string]any{"action": "accept", "content": map[string]any{"approve": false, "reason": "too risky"}}, "rejected deploy: too risky", false},
		{"decline", map[string]any{"action": "decline"}, "not approved", true},
		{"cancel", map[string]any{"action": "cancel"}, "not approved", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c.t = t
			id := c.startTask("approve", map[string]any{"action": "deploy"})
			key, req := approveInput(t, c, id)
			if key != "approve-1" {
				t.Fatalf("key %q", key)
			}
			wantReq := `{"method":"elicitation/create","params":{"mode":"form","message":"Approve deploy?","requestedSchema":{"type":"object","properties":{"approve":{"type":"boolean","title":"Approve"},"reason":{"type":"string","title":"Reason"}},"required":["approve","reason"]}}}`
			assertJSON(t, req, wantReq)
			c.update(id, map[string]any{key: tc.answer})
			res := c.waitFor(id, nil, "completed", "failed")
			r := res["result"].(map[string]any)
			if res["status"] != "completed" || resultText(t, r) != tc.text || (r["isError"] == true) != tc.isError {
				t.Fatalf("got %v", res)
			}
		})
	}
}

func TestApproveAsksAgainOnInvalidAnswer(t *testing.T) {
	e := newEnv(t, Options{})
	c := e.client(t, true)
	id := c.startTask("approve", map[string]any{"action": "deploy"})
	key, _ := approveInput(t, c, id)
	// Unknown keys are ignored; a wrongly typed answer is asked again.
	c.update(id, map[string]any{
		"nope": map[string]any{"action": "accept"},
		key:    map[string]any{"action": "accept", "content": map[string]any{"approve": "yes", "reason": 5}},
	})
	var key2 string
	var req2 map[string]any
	c.waitFor(id, func(m map[string]any) {
		if m["status"] == "input_required" {
			for k, v := range m["inputRequests"].(map[string]any) {
				key2, req2 = k, v.(map[string]any)
			}
		}
	}, "input_required")
	deadline := time.Now().Add(waitfor.Scale(5 * time.Second))
	for key2 == key && time.Now().Before(deadline) { // the ack is eventually consistent
		key2, req2 = approveInput(t, c, id)
	}
	if key2 != "approve-2" {
		t.Fatalf("second key %q", key2)
	}
	msg := req2["params"].(map[string]any)["message"].(string)
	if !strings.HasPrefix(msg, "Approve deploy?") || !strings.Contains(msg, "not valid") {
		t.Fatalf("message does not say what was wrong: %q", msg)
	}
	c.update(id, map[string]any{key: map[string]any{"action": "accept", "content": map[string]any{"approve": true, "reason": "late"}}}) // answered: ignored
	if k, _ := approveInput(t, c, id); k != "approve-2" {
		t.Fatalf("answered key reopened: %q", k)
	}
	c.update(id, map[string]any{key2: map[string]any{"action": "accept", "content": map[string]any{"approve": true, "reason": "ok now"}}})
	res := c.waitFor(id, nil, "completed")
	if got := resultText(t, res["result"]); got != "approved deploy: ok now" {
		t.Fatalf("result %q", got)
	}
	// A malformed answer to an outstanding key is refused, not fatal.
	id = c.startTask("approve", map[string]any{"action": "x"})
	key, _ = approveInput(t, c, id)
	c.fails("tasks/update", map[string]any{"taskId": id, "inputResponses": map[string]any{key: "garbage"}}, -32602)
	c.fails("tasks/update", map[string]any{"taskId": id, "inputResponses": map[string]any{key: map[string]any{"action": "maybe"}}}, -32602)
	if k, _ := approveInput(t, c, id); k != key {
		t.Fatalf("key changed after refused answers: %q", k)
	}
}

func TestFail(t *testing.T) {
	e := newEnv(t, Options{})
	c := e.client(t, true)
	res := c.waitFor(c.startTask("fail", map[string]any{"mode": "error"}), nil, "failed", "completed")
	if res["status"] != "failed" || res["result"] != nil {
		t.Fatalf("mode error: %v", res)
	}
	assertJSON(t, res["error"], `{"code":-32603,"message":"simulated failure"}`)
	res = c.waitFor(c.startTask("fail", map[string]any{"mode": "tool"}), nil, "failed", "completed")
	if res["status"] != "completed" || res["error"] != nil || res["result"].(map[string]any)["isError"] != true {
		t.Fatalf("mode tool: %v", res)
	}
}

func TestPipelineChangesPollInterval(t *testing.T) {
	// Stages as long as the machine is slow: a poller that misses a stage
	// sees fewer intervals.
	e := newEnv(t, Options{PollInterval: 700 * time.Millisecond, Speed: waitfor.Slowdown})
	c := e.client(t, true)
	id := c.startTask("pipeline", map[string]any{"stages": 3})
	polls, stages := map[float64]bool{}, map[string]bool{}
	res := c.waitFor(id, func(m map[string]any) {
		polls[m["pollIntervalMs"].(float64)] = true
		if s, _ := m["statusMessage"].(string); strings.HasPrefix(s, "stage ") {
			stages[s] = true
		}
	}, "completed")
	if len(polls) < 3 {
		t.Errorf("pollIntervalMs took only %v", polls)
	}
	if !stages["stage 1/3: fetch"] || !stages["stage 3/3: test"] {
		t.Errorf("stages seen: %v", stages)
	}
	if got := resultText(t, res["result"]); got != "pipeline finished: 3 stages" {
		t.Fatalf("result %q", got)
	}
	// stages defaults to 3; cancel works mid-pipeline.
	id = c.startTask("pipeline", nil)
	c.waitFor(id, nil, "working")
	c.ok("tasks/cancel", map[string]any{"taskId": id})
	if got := c.get(id)["status"]; got != "cancelled" {
		t.Fatalf("status %v", got)
	}
}

func TestSurvey(t *testing.T) {
	e := newEnv(t, Options{})
	c := e.client(t, true)
	id := c.startTask("survey", nil)
	reqs := c.waitFor(id, nil, "input_required")["inputRequests"].(map[string]any)
	if len(reqs) != 2 || reqs["contact-1"] == nil || reqs["rating-1"] == nil {
		t.Fatalf("input requests %v", reqs)
	}
	schema := func(r any) map[string]any {
		return r.(map[string]any)["params"].(map[string]any)["requestedSchema"].(map[string]any)["properties"].(map[string]any)
	}
	assertJSON(t, schema(reqs["contact-1"])["email"], `{"type":"string","format":"email","title":"Email"}`)
	assertJSON(t, schema(reqs["contact-1"])["plan"].(map[string]any)["oneOf"],
		`[{"const":"free","title":"Free"},{"const":"pro","title":"Pro"},{"const":"team","title":"Team"}]`)
	assertJSON(t, schema(reqs["rating-1"])["score"], `{"type":"number","title":"Score","minimum":1,"maximum":10}`)

	// A partial answer leaves the other key outstanding.
	c.update(id, map[string]any{"rating-1": map[string]any{"action": "accept", "content": map[string]any{"score": 8}}})
	reqs = c.get(id)["inputRequests"].(map[string]any)
	if len(reqs) != 1 || reqs["contact-1"] == nil {
		t.Fatalf("after a partial answer: %v", reqs)
	}
	// A bad email is asked again under a new key; the rating is kept.
	c.update(id, map[string]any{"contact-1": map[string]any{"action": "accept", "content": map[string]any{"email": "nope", "plan": "pro"}}})
	var got map[string]any
	until(t, "contact-2 to be asked", func() bool {
		r, ok := c.get(id)["inputRequests"].(map[string]any)
		got = r
		return ok && r["contact-2"] != nil
	})
	if len(got) != 1 || !strings.Contains(got["contact-2"].(map[string]any)["params"].(map[string]any)["message"].(string), "not an email") {
		t.Fatalf("re-asked: %v", got)
	}
	c.update(id, map[string]any{"contact-2": map[string]any{"action": "accept", "content": map[string]any{"email": "a@example.com", "plan": "team"}}})
	res := c.waitFor(id, nil, "completed")
	if txt := resultText(t, res["result"]); txt != "survey: email=a@example.com plan=team score=8" {
		t.Fatalf("result %q", txt)
	}
}

func TestConfirmFirstMRTR(t *testing.T) {
	e := newEnv(t, Options{})
	c := e.client(t, true)
	first := c.tool("confirm_first", nil)
	if first["resultType"] != "input_required" || first["taskId"] != nil {
		t.Fatalf("first round: %v", first)
	}
	state, _ := first["requestState"].(string)
	ir := first["inputRequests"].(map[string]any)["confirm"].(map[string]any)
	if state == "" || ir["method"] != "elicitation/create" {
		t.Fatalf("first round: %v", first)
	}
	yes := map[string]any{"confirm": map[string]any{"action": "accept", "content": map[string]any{"confirm": true}}}
	// A forged state or a wrongly typed answer is another input_required round.
	for _, retry := range []map[string]any{
		{"name": "confirm_first", "inputResponses": yes, "requestState": "forged"},
		{"name": "confirm_first", "requestState": state,
			"inputResponses": map[string]any{"confirm": map[string]any{"action": "accept", "content": map[string]any{"confirm": "yes"}}}},
	} {
		if res := c.ok("tools/call", retry); res["resultType"] != "input_required" {
			t.Fatalf("retry %v: %v", retry, res)
		}
	}
	res := c.ok("tools/call", map[string]any{"name": "confirm_first", "inputResponses": yes, "requestState": state})
	if res["resultType"] != "task" {
		t.Fatalf("answered retry: %v", res)
	}
	done := c.waitFor(res["taskId"].(string), nil, "completed")
	if got := resultText(t, done["result"]); got != "confirmed" {
		t.Fatalf("result %q", got)
	}
	if n := e.srv.Stats().ToolCalls["confirm_first"]; n != 4 {
		t.Fatalf("confirm_first calls counted %d, want 4 (every MRTR round)", n)
	}
}

func TestMissingCapability(t *testing.T) {
	e := newEnv(t, Options{})
	id := e.client(t, true).startTask("sleep", map[string]any{"seconds": 1})
	c := e.client(t, false)
	for _, call := range []struct {
		method string
		params map[string]any
	}{
		{"tasks/get", map[string]any{"taskId": id}},
		{"tasks/update", map[string]any{"taskId": id, "inputResponses": map[string]any{}}},
		{"tasks/cancel", map[string]any{"taskId": id}},
		{"tools/call", map[string]any{"name": "sleep", "arguments": map[string]any{"seconds": 1}}},
		{"tools/call", map[string]any{"name": "approve", "arguments": map[string]any{"action": "x"}}},
		{"tools/call", map[string]any{"name": "confirm_first"}},
	} {
		r := c.call(call.method, call.params)
		if r.Error == nil || r.Error.Code != -32021 || r.Status != http.StatusBadRequest {
			t.Fatalf("%s: %d %s", call.method, r.Status, r.Raw)
		}
		assertJSON(t, r.Error.Data, `{"requiredCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`)
	}
}

func TestUnknownTaskAndMethods(t *testing.T) {
	e := newEnv(t, Options{})
	c := e.client(t, true)
	for _, m := range []string{"tasks/get", "tasks/update", "tasks/cancel"} {
		err := c.fails(m, map[string]any{"taskId": "NOSUCHTASK", "inputResponses": map[string]any{}}, -32602)
		if err.Message != "Failed to retrieve task: Task not found" {
			t.Fatalf("%s: message %q", m, err.Message)
		}
	}
	c.fails("tasks/list", nil, -32601)
	c.fails("tasks/result", map[string]any{"taskId": "x"}, -32601)
	c.fails("no/such/method", nil, -32601)
}

func TestMcpNameMustMatchTaskID(t *testing.T) {
	e := newEnv(t, Options{})
	c := e.client(t, true)
	id := c.startTask("sleep", map[string]any{"seconds": 1})
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tasks/get",
		"params": map[string]any{"taskId": id, "_meta": c.meta()}})
	h := http.Header{"Mcp-Method": {"tasks/get"}, "Mcp-Name": {"someone-else"}}
	for _, name := range []string{"someone-else", ""} {
		h.Set("Mcp-Name", name)
		if r := e.http.roundTrip(t, h, body); r.Error == nil || r.Error.Code != -32020 || r.Status != http.StatusBadRequest || string(r.ID) != "1" {
			t.Fatalf("Mcp-Name %q: %d %s", name, r.Status, r.Raw)
		}
	}
	h.Set("Mcp-Name", "=?base64?"+b64(id)+"?=")
	if r := e.http.roundTrip(t, h, body); r.Error != nil {
		t.Fatalf("base64 form: %s", r.Raw)
	}
}

func TestTTLExpiry(t *testing.T) {
	// Long enough for the first reads below on a busy machine.
	ttl := waitfor.Scale(time.Second)
	e := newEnv(t, Options{TTL: ttl})
	c := e.client(t, true)
	done := c.startTask("sleep", map[string]any{"seconds": 0})
	running := c.startTask("sleep", map[string]any{"seconds": 1000})
	if got := c.get(running)["ttlMs"]; got != float64(ttl.Milliseconds()) {
		t.Fatalf("ttlMs %v, want %d", got, ttl.Milliseconds())
	}
	c.waitFor(done, nil, "completed")
	// The later of the two expires last; the earlier must be gone by then.
	until(t, "the running task to expire", func() bool {
		r := c.call("tasks/get", map[string]any{"taskId": running})
		return r.Error != nil && r.Error.Code == -32602
	})
	for _, id := range []string{done, running} {
		c.fails("tasks/get", map[string]any{"taskId": id}, -32602)
		c.fails("tasks/cancel", map[string]any{"taskId": id}, -32602)
	}
}

func TestMalformedHTTPRequests(t *testing.T) {
	e := newEnv(t, Options{})
	c := e.client(t, true)
	meta := c.meta()
	bodies := []struct {
		method string
		body   string
	}{
		{"tools/call", `{garbage`},
		{"tools/call", ``},
		{"tools/call", `[]`},
		{"tools/call", `{"jsonrpc":"2.0","id":1,"method":"tools/call"}`},
		{"tasks/get", `{"jsonrpc":"2.0","id":1,"method":"tasks/get"}`},
		{"tasks/get", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":null}`},
		{"tasks/get", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":"x"}`},
		{"tasks/get", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":5,"_meta":` + js(meta) + `}}`},
		{"tasks/update", `{"jsonrpc":"2.0","id":1,"method":"tasks/update","params":{"taskId":"x","inputResponses":[1],"_meta":` + js(meta) + `}}`},
		{"tasks/cancel", `{"jsonrpc":"2.0","id":1,"method":"tasks/cancel","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":5}}}`},
		{"tools/call", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"sleep","arguments":{"seconds":"abc"},"_meta":` + js(meta) + `}}`},
		{"tools/call", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"sleep","arguments":[],"_meta":` + js(meta) + `}}`},
		{"tools/call", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"nope","_meta":` + js(meta) + `}}`},
		{"tools/call", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"sleep","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`},
	}
	for _, b := range bodies {
		h := http.Header{"Mcp-Method": {b.method}, "Mcp-Name": {"sleep"}}
		status, raw := e.http.post(t, h, []byte(b.body))
		t.Logf("%s → %d %s", b.body, status, raw)
		if status == 0 || status >= 500 {
			t.Fatalf("%s: status %d", b.body, status)
		}
	}
	// A task whose arguments fail validation completes as a tool error.
	id := c.startTask("sleep", map[string]any{"seconds": -1})
	if res := c.waitFor(id, nil, "completed"); res["result"].(map[string]any)["isError"] != true {
		t.Fatalf("invalid arguments: %v", res)
	}
	// Still serving.
	if res := c.tool("echo", map[string]any{"text": "alive"}); resultText(t, res) != "alive" {
		t.Fatalf("after malformed requests: %v", res)
	}
}

func TestStdio(t *testing.T) {
	e := newEnv(t, Options{})
	rt := e.stdio(t)
	for _, line := range []string{`{garbage`, `[1,2]`, `{"jsonrpc":"2.0"}`, `"just a string"`, strings.Repeat("x", maxLine+10)} {
		rt.send(t, []byte(line))
		r := rt.reply(t)
		if r.Error == nil || (r.Error.Code != -32700 && r.Error.Code != -32600) {
			t.Fatalf("%.40s: %s", line, r.Raw)
		}
	}
	c := &client{t: t, rt: rt, tasks: true}
	c.ok("server/discover", nil)
	// Pitfall: on a live stdio session, tasks/* without params reached the
	// handler as a typed nil and crashed the process.
	for line, code := range map[string]int64{
		`{"jsonrpc":"2.0","id":"a","method":"tasks/get"}`:                  -32602,
		`{"jsonrpc":"2.0","id":"b","method":"tasks/update","params":null}`: -32602,
		`{"jsonrpc":"2.0","id":"c","method":"tasks/cancel","params":{}}`:   -32021,
	} {
		rt.send(t, []byte(line))
		if r := rt.reply(t); r.Error == nil || r.Error.Code != code {
			t.Fatalf("%s: %s", line, r.Raw)
		}
	}
	id := c.startTask("sleep", map[string]any{"seconds": 2})
	res := c.waitFor(id, nil, "completed")
	if got := resultText(t, res["result"]); got != "slept 2 s" {
		t.Fatalf("result %q", got)
	}
	id = c.startTask("sleep", map[string]any{"seconds": 100})
	c.ok("tasks/cancel", map[string]any{"taskId": id})
	if got := c.get(id)["status"]; got != "cancelled" {
		t.Fatalf("status %v", got)
	}
	(&client{t: t, rt: rt, tasks: false}).fails("tasks/get", map[string]any{"taskId": id}, -32021)
}

// Closing stdin ends the session (go-sdk drops replies still in flight).
func TestStdioEndsWithInput(t *testing.T) {
	srv := New(Options{})
	defer srv.Close()
	var out strings.Builder
	if err := srv.ServeStdio(t.Context(), strings.NewReader("{bad\n\n"), &out); err != nil {
		t.Fatalf("ServeStdio: %v", err)
	}
	if !strings.Contains(out.String(), `-32700`) {
		t.Fatalf("output %s", out.String())
	}
}

func TestStats(t *testing.T) {
	e := newEnv(t, Options{})
	c := e.client(t, true)
	a := c.startTask("sleep", map[string]any{"seconds": 0})
	b := c.startTask("sleep", map[string]any{"seconds": 0})
	c.tool("echo", map[string]any{"text": "x"})
	c.waitFor(a, nil, "completed")
	c.get(b)
	c.update(b, map[string]any{})
	c.ok("tasks/cancel", map[string]any{"taskId": b})
	e.client(t, false).call("tools/call", map[string]any{"name": "sleep", "arguments": map[string]any{"seconds": 0}})
	st := e.srv.Stats()
	if st.ToolCalls["sleep"] != 3 || st.ToolCalls["echo"] != 1 || st.TasksCreated != 2 ||
		!slices.Equal(st.TaskIDs, []string{a, b}) || st.Updates != 1 || st.Cancels != 1 || st.Gets < 2 {
		t.Fatalf("stats %+v", st)
	}
	st.ToolCalls["sleep"] = 99 // a copy
	if e.srv.Stats().ToolCalls["sleep"] != 3 {
		t.Fatal("Stats shares its map")
	}
}

func TestTaskIDsAreRandom(t *testing.T) {
	e := newEnv(t, Options{})
	c := e.client(t, true)
	seen := map[string]bool{}
	for range 20 {
		id := c.startTask("sleep", map[string]any{"seconds": 0})
		if len(id) != 26 || seen[id] || strings.Trim(id, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567") != "" {
			t.Fatalf("task id %q", id)
		}
		seen[id] = true
	}
}

func assertJSON(t *testing.T, got any, want string) {
	t.Helper()
	var g, w any
	raw, ok := got.(json.RawMessage)
	if !ok {
		raw, _ = json.Marshal(got)
	}
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatalf("bad JSON %s: %v", raw, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatal(err)
	}
	if js(g) != js(w) {
		t.Fatalf("got  %s\nwant %s", js(g), js(w))
	}
}

func js(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// until polls cond until it holds, failing the test after 10 s.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitfor.Scale(10 * time.Second))
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// The instant tool's handle says it has ended, without the outcome, which
// only tasks/get carries (spec §11); without the extension it is a plain
// result.
func TestInstantHandleIsAlreadyTerminal(t *testing.T) {
	e := newEnv(t, Options{})
	c := e.client(t, true)
	for mode, status := range map[string]string{"result": "completed", "error": "failed"} {
		h := c.tool(InstantTool, map[string]any{"text": "now", "mode": mode})
		if h["resultType"] != "task" || h["status"] != status || h["result"] != nil || h["error"] != nil {
			t.Fatalf("%s: handle %v; want a %s handle without its outcome", mode, h, status)
		}
		got := c.get(h["taskId"].(string))
		switch {
		case status == "completed" && resultText(t, got["result"].(map[string]any)) != "instant: now",
			status == "failed" && got["error"].(map[string]any)["message"] != "instant failure":
			t.Fatalf("%s: tasks/get %v", mode, got)
		}
	}
	if res := e.client(t, false).tool(InstantTool, map[string]any{"text": "now"}); res["resultType"] != "complete" || resultText(t, res) != "instant: now" {
		t.Fatalf("without the extension: %v", res)
	}
}
