package proxy

import (
	"cmp"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/internal/nodetest"
	"github.com/taskdeck/taskdeck/internal/testproc"
	"github.com/taskdeck/taskdeck/internal/waitfor"
	"github.com/taskdeck/taskdeck/model"
)

// legacyLine is one outcome legacy.mjs printed.
type legacyLine struct {
	Fail     string   `json:"fail"`
	Session  *string  `json:"session"`
	Version  string   `json:"protocolVersion"`
	Tool     string   `json:"tool"`
	Kind     string   `json:"kind"`
	TaskID   string   `json:"taskId"`
	Status   string   `json:"status"`
	Text     string   `json:"text"`
	Listed   []string `json:"listed"`
	Statuses []string `json:"statuses"`
	Peeked   string   `json:"peeked"`
	Error    string   `json:"error"`
}

// runLegacyAgent runs legacy.mjs with token to its end and returns what
// it printed.
func runLegacyAgent(t *testing.T, dir, token string, args ...string) []legacyLine {
	t.Helper()
	cmd, lines := startScript(t, dir, []string{"TASKDECK_AGENT_TOKEN=" + token}, "legacy.mjs", args...)
	var got []legacyLine
	var text []string
	for lines.Scan() {
		t.Log(lines.Text())
		text = append(text, lines.Text())
		var l legacyLine
		if err := json.Unmarshal(lines.Bytes(), &l); err != nil {
			t.Fatalf("the agent printed %q: %v", lines.Text(), err)
		}
		got = append(got, l)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the agent failed (%v): %s", err, strings.Join(text, "\n"))
	}
	return got
}

// The official TypeScript client pinned to 2025-11-25, with the official
// tasks requester's generation-1 side (ext-tasks 0.2.2), through the
// proxy in front of the demo server: a session the proxy issued; call →
// task → poll → result, a failure, a cancel, every one a record the agent
// was told of; tasks/list gives its own tasks; another agent's list is
// empty and the first agent's task id is unknown to it.
func TestLegacyAgentTaskFlows(t *testing.T) {
	dir := agentDir(t)
	r, _ := twoAgents(t)
	got := runLegacyAgent(t, dir, tokenA, r.url, "flows")
	if len(got) == 0 || got[0].Session == nil || *got[0].Session == "" || got[0].Version != "2025-11-25" {
		t.Fatalf("the agent's first line %+v: want a session of 2025-11-25", got[0])
	}
	var told, ids []string
	var listed legacyLine
	for _, l := range got[1:] {
		switch {
		case l.Listed != nil:
			listed = l
		case l.Tool != "":
			told = append(told, strings.TrimSpace(strings.Join([]string{l.Tool, l.Kind, l.Status, l.Text}, " ")))
			ids = append(ids, l.TaskID)
		}
	}
	want := []string{
		"echo task completed hello",
		"sleep task completed slept 1 s",
		"fail task failed simulated failure",
		"sleep task cancelled",
	}
	if strings.Join(told, "\n") != strings.Join(want, "\n") {
		t.Errorf("the agent was told:\n%s\nwant:\n%s", strings.Join(told, "\n"), strings.Join(want, "\n"))
	}
	newest := slices.Clone(ids)
	slices.Reverse(newest)
	if !slices.Equal(listed.Listed, newest) {
		t.Errorf("tasks/list gave %q, want the agent's tasks, newest first: %q", listed.Listed, newest)
	}
	if want := []string{"cancelled", "failed", "completed", "completed"}; !slices.Equal(listed.Statuses, want) {
		t.Errorf("tasks/list said %q, want %q", listed.Statuses, want)
	}

	// Every task the agent heard of is a record of its own, as it was told.
	list, err := r.eng.List(context.Background(), deck.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != len(want) {
		t.Fatalf("%d records for the agent's %d calls", len(list), len(want))
	}
	byID := map[string]*model.Task{}
	for _, e := range list {
		byID[e.Task.ID] = e.Task
	}
	for i, id := range ids {
		rid, _, _ := strings.Cut(id, handleSep)
		rec := byID[rid]
		if rec == nil {
			t.Errorf("the agent's task %s names no record", id)
			continue
		}
		if rec.Owner != "a" || rec.Agent != "ts-legacy-agent" || string(rec.Status) != strings.Fields(want[i])[2] {
			t.Errorf("record %s (%s): owner %q, agent %q, %s; the agent was told %s", rec.ID, rec.Tool, rec.Owner, rec.Agent, rec.Status, want[i])
		}
	}

	// Agent b, on the same server, sees none of it.
	peek := runLegacyAgent(t, dir, tokenB, r.url, "peek", ids[1])
	last := peek[len(peek)-2:]
	if len(last[0].Listed) != 0 {
		t.Errorf("agent b's tasks/list gave %q, want none", last[0].Listed)
	}
	if last[1].Peeked != ids[1] || last[1].Status != "" || !strings.Contains(last[1].Error, "Task not found") {
		t.Errorf("agent b's tasks/get of a's task: %+v, want it unknown", last[1])
	}
}

// legacyOpen initializes a 2025-11-25 session at url with token and
// returns the session id and the InitializeResult.
func legacyOpen(t testing.TB, url, token string) (string, answer) {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var a answer
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("initialize: HTTP %d %v", resp.StatusCode, err)
	}
	return resp.Header.Get("Mcp-Session-Id"), a
}

// legacyHeaders are a 2025-11-25 request's headers on session sid.
func legacyHeaders(token, sid string) map[string]string {
	return map[string]string{"Authorization": "Bearer " + token, "Mcp-Protocol-Version": "2025-11-25", "Mcp-Method": "", "Mcp-Session-Id": sid}
}

// A session is the proxy's, bound to the agent and the server that opened
// it: another agent's token, or an id the proxy never gave, is 404, as is
// a session ended by DELETE. Its tools are task-optional, a viewer may not
// call, and a call without params.task is held to its end and answered
// without the newer revision's resultType.
func TestLegacySessions(t *testing.T) {
	r, _ := twoAgents(t)
	sid, init := legacyOpen(t, r.url, tokenA)
	if sid == "" || str(init.Result["protocolVersion"]) != "2025-11-25" || !strings.Contains(string(init.Result["capabilities"]), `"requests":{"tools":{"call":{}}}`) {
		t.Fatalf("initialize gave session %q and %s", sid, init.Result)
	}
	status, a := rpc(t, r.url, "tools/list", `{}`, legacyHeaders(tokenA, sid))
	var tools []struct {
		Name      string
		Execution struct{ TaskSupport string }
	}
	if err := json.Unmarshal(a.Result["tools"], &tools); status != http.StatusOK || err != nil || len(tools) == 0 {
		t.Fatalf("tools/list: HTTP %d %+v %v", status, a, err)
	}
	for _, tool := range tools {
		if tool.Execution.TaskSupport != "optional" {
			t.Errorf("tool %s says taskSupport %q, want optional", tool.Name, tool.Execution.TaskSupport)
		}
	}
	for what, hdr := range map[string]map[string]string{
		"agent b with a's session": legacyHeaders(tokenB, sid),
		"an id never given":        legacyHeaders(tokenA, "NOSUCHSESSION"),
	} {
		if status, a := rpc(t, r.url, "tools/list", `{}`, hdr); status != http.StatusNotFound || a.Error == nil || !strings.Contains(a.Error.Message, "initialize again") {
			t.Errorf("%s: HTTP %d %+v, want 404 and initialize again", what, status, a)
		}
	}

	status, a = rpc(t, r.url, "tools/call", `{"name":"echo","arguments":{"text":"held"}}`, legacyHeaders(tokenA, sid))
	if status != http.StatusOK || a.Result["resultType"] != nil || !strings.Contains(string(a.Result["content"]), "held") {
		t.Errorf("a held call: HTTP %d %+v, want its result without resultType", status, a)
	}

	vsid, _ := legacyOpen(t, r.url, tokenV)
	if _, a := rpc(t, r.url, "tools/call", `{"name":"echo","arguments":{"text":"x"},"task":{}}`, legacyHeaders(tokenV, vsid)); a.Error == nil || !strings.Contains(a.Error.Message, "viewer") {
		t.Errorf("a viewer's call: %+v, want refused", a)
	}

	del, err := http.NewRequest(http.MethodDelete, r.url, nil)
	if err != nil {
		t.Fatal(err)
	}
	del.Header.Set("Authorization", "Bearer "+tokenA)
	del.Header.Set("Mcp-Session-Id", sid)
	resp, err := http.DefaultClient.Do(del)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Errorf("DELETE of the session: HTTP %d, want 204", resp.StatusCode)
	}
	if status, _ := rpc(t, r.url, "tools/list", `{}`, legacyHeaders(tokenA, sid)); status != http.StatusNotFound {
		t.Errorf("the ended session: HTTP %d, want 404", status)
	}
	list, err := r.eng.List(context.Background(), deck.Filter{})
	if err != nil || len(list) != 1 || list[0].Task.Agent != "raw" || list[0].Task.Status != model.StatusCompleted {
		t.Errorf("records %+v %v: want the held call's alone, completed, of the agent raw", list, err)
	}
}

// The front's memory is bounded: past maxLegacySessions the least
// recently used session's state is dropped, and its id, which the front
// signed, still works (as after a restart); a session ended by DELETE
// stays ended, and at most maxLegacySessions ended ids are remembered.
// An id is its principal's and its server's: another's is refused.
func TestLegacyFrontBounds(t *testing.T) {
	l := newLegacyFront([]byte("key"))
	first := l.open("a", "demo", "agent-1", true)
	second := l.open("a", "demo", "", false)
	for range maxLegacySessions - 2 {
		l.open("a", "demo", "", false)
	}
	if _, ok := l.use(first, "a", "demo"); !ok { // now the most recently used
		t.Fatal("a session within the bound ended")
	}
	l.open("a", "demo", "", false)
	if len(l.sessions) != maxLegacySessions || l.sessions[second] != nil || l.sessions[first] == nil {
		t.Errorf("%d states kept (the least recently used's: %v): want %d, the least recently used's dropped", len(l.sessions), l.sessions[second] != nil, maxLegacySessions)
	}
	if _, ok := l.use(second, "a", "demo"); !ok {
		t.Error("a session whose state was dropped is refused")
	}
	restarted := newLegacyFront([]byte("key"))
	if s, ok := restarted.use(first, "a", "demo"); !ok || s.label != "agent-1" || !s.elicit {
		t.Errorf("after a restart the session is %+v (%v), want agent-1's, taking questions", s, ok)
	}
	for who, server := range map[string]string{"b": "demo", "a": "other"} {
		if _, ok := restarted.use(first, who, server); ok {
			t.Errorf("a's session at demo taken for %s at %s", who, server)
		}
	}
	if _, ok := newLegacyFront([]byte("another key")).use(first, "a", "demo"); ok {
		t.Error("a session id taken under another key")
	}
	for range maxLegacySessions + 5 {
		if !l.end(l.open("a", "demo", "", false), "a", "demo") {
			t.Fatal("a session did not end")
		}
	}
	if len(l.ended) != maxLegacySessions || len(l.endedOrder) != maxLegacySessions {
		t.Errorf("%d ended sessions remembered, want %d", len(l.ended), maxLegacySessions)
	}
}

// The TypeScript SDK 1.x's client, with its experimental tasks API, in
// front of the demo server: approve's question, asked inside the task
// (and confirm_first's, asked before the server's task exists), comes to
// the agent as elicitation/create on the tasks/result stream, marked with
// the task it belongs to; its answer is the record's answer, given in the
// agent's name; the task ends with what the answer said.
func TestLegacySDKClientAnswersInTask(t *testing.T) {
	l := nodetest.LegacyServers(t)
	r, _ := twoAgents(t)
	sdkAnswers(t, l, r, "approve", `{"action":"ship"}`, `{"approve":true,"reason":"sdk1 says yes"}`, "approved ship: sdk1 says yes", "approve-1")
	sdkAnswers(t, l, r, "confirm_first", `{}`, `{"confirm":true}`, "confirmed", "")
}

// sdkAnswers runs the SDK 1.x agent on tool, answering with answer, and
// checks what it was told against want and the record (whose question
// key, when given, must hold the agent's answer).
func sdkAnswers(t *testing.T, l nodetest.Legacy, r *rig, tool, args, answer, want, key string) {
	t.Helper()
	// A question never relayed would hold tasks/result to the hold limit.
	ctx, cancel := context.WithTimeout(context.Background(), waitfor.Scale(time.Minute))
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", l.SDKClient(), r.url, tool, args)
	cmd.Env = append(os.Environ(), "TASKDECK_AGENT_TOKEN="+tokenA, "ANSWER_JSON="+answer)
	cmd.Stderr = &testWriter{t}
	testproc.Group(cmd)
	cmd.Cancel = func() error { return testproc.Signal(cmd, syscall.SIGKILL) }
	stdout, err := cmd.Output()
	t.Logf("%s", stdout)
	if err != nil {
		t.Fatalf("the SDK 1.x agent failed: %v", err)
	}
	var taskID, related, text string
	for line := range strings.Lines(string(stdout)) {
		var m struct{ TaskID, Related, Input, Text string }
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("the agent printed %q: %v", line, err)
		}
		taskID, related, text = cmp.Or(taskID, m.TaskID), cmp.Or(related, m.Related), cmp.Or(text, m.Text)
	}
	if taskID == "" || related != taskID || text != want {
		t.Fatalf("%s: task %q, question of task %q, result %q: want the question marked with the task, and %q", tool, taskID, related, text, want)
	}
	rid, _, _ := strings.Cut(taskID, handleSep)
	e, err := r.eng.Get(context.Background(), rid)
	if err != nil {
		t.Fatal(err)
	}
	if rec := e.Task; rec.Agent != "sdk1-agent" || rec.Owner != "a" || rec.Status != model.StatusCompleted {
		t.Errorf("record %s: agent %q, owner %q, %s: want sdk1-agent's, a's, completed", rec.ID, rec.Agent, rec.Owner, rec.Status)
	}
	if a, ok := e.Task.LastAnswer(key); key != "" && (!ok || a.Who() != "a") {
		t.Errorf("record %s: answer %+v (%v): want the answer given as agent a", rid, a, ok)
	}
}
