package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/engine"
	"github.com/taskdeck/taskdeck/internal/hostile"
	"github.com/taskdeck/taskdeck/internal/waitfor"
	mcpconfig "github.com/taskdeck/taskdeck/mcpclient/config"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/service"
)

// quietEngine keeps the engine's own polls (and push's safety polls) out
// of the test's way: every tasks/get the server sees is the proxy's.
func quietEngine(o *engine.Options) {
	o.Policy = model.PollPolicy{Default: time.Hour, Floor: time.Hour, Cap: time.Hour, Growth: 1.5}
	o.PushSafety = time.Hour
}

// holdRig is a demo server with the hold tool (a task that changes only
// when the test steps it) at pollIntervalMs 50, the quiet engine and the
// proxy; it returns the rig and the record id of one held task.
func holdRig(t *testing.T, push bool) (*rig, string) {
	t.Helper()
	srv := hostile.Start(t, demo.Options{Hold: true, NoPush: !push, PollInterval: 50 * time.Millisecond})
	r := startRigWith(t, srv, fmt.Sprintf(`{"mcpServers":{"demo":{"url":%q}}}`, srv.URL), Options{}, quietEngine)
	_, a := rpc(t, r.url, "tools/call", `{"name":"hold","arguments":{"steps":3},"_meta":`+metaJSON("a", true)+`}`, nil)
	if a.Error != nil {
		t.Fatal(a.Error.Message)
	}
	return r, str(a.Result["taskId"])
}

// pastInterval waits until the server's pollIntervalMs has passed since
// the record last changed or was polled: a tasks/get of a polled task is
// then the server's to answer.
func pastInterval(t *testing.T, r *rig, id string) {
	t.Helper()
	until(t, "pollIntervalMs passed", func() bool {
		e, err := r.eng.Get(context.Background(), id)
		if err != nil {
			return false
		}
		last := e.Task.UpdatedAt
		if e.Poll.LastPolled.After(last) {
			last = e.Poll.LastPolled
		}
		return time.Since(last) > 2*e.Task.ServerPollInterval()
	})
}

// step moves the held task on, once the server has it ready.
func step(t *testing.T, r *rig, taskID string) {
	t.Helper()
	until(t, "the server steps the task", func() bool { return r.srv.Demo.Step(taskID) == nil })
}

func agentGet(t *testing.T, r *rig, id string) answer {
	t.Helper()
	_, a := rpc(t, r.url, "tasks/get", `{"taskId":"`+id+`","_meta":`+metaJSON("a", true)+`}`, nil)
	if a.Error != nil {
		t.Fatalf("tasks/get: %s", a.Error.Message)
	}
	return a
}

// A task the server pushes is current in the record: the agent's tasks/get
// is answered from it, with what the server pushed, and costs the server
// no tasks/get however long since the last poll.
func TestTasksGetOfPushedTaskSendsNoPoll(t *testing.T) {
	r, id := holdRig(t, true)
	until(t, "the server pushes the task", func() bool {
		e, err := r.eng.Get(context.Background(), id)
		return err == nil && e.Poll.Pushed
	})
	e, _ := r.eng.Get(context.Background(), id)
	step(t, r, e.Task.TaskID)
	until(t, "the pushed step in the record", func() bool {
		e, err := r.eng.Get(context.Background(), id)
		return err == nil && e.Task.StatusMessage == "step 1 of 3"
	})
	pastInterval(t, r, id)
	before := len(r.srv.Requests("tasks/get"))
	for range 5 {
		if a := agentGet(t, r, id); str(a.Result["statusMessage"]) != "step 1 of 3" {
			t.Fatalf("the agent got %q, not the pushed step", a.Result["statusMessage"])
		}
	}
	if n := len(r.srv.Requests("tasks/get")) - before; n != 0 {
		t.Fatalf("5 agent tasks/get of a pushed task sent %d tasks/get to the server", n)
	}
}

// Without push, a tasks/get once pollIntervalMs has passed since the last
// poll is answered with a poll of the server, and shows what it found.
func TestTasksGetOfPolledTaskPollsOnceIntervalPassed(t *testing.T) {
	r, id := holdRig(t, false)
	e, _ := r.eng.Get(context.Background(), id)
	if e.Poll.Pushed {
		t.Fatal("a server without push pushes the task")
	}
	step(t, r, e.Task.TaskID)
	pastInterval(t, r, id)
	before := len(r.srv.Requests("tasks/get"))
	if a := agentGet(t, r, id); str(a.Result["statusMessage"]) != "step 1 of 3" {
		t.Fatalf("the agent got %q, not the step the poll found", a.Result["statusMessage"])
	}
	if n := len(r.srv.Requests("tasks/get")) - before; n != 1 {
		t.Fatalf("an agent tasks/get past pollIntervalMs sent %d tasks/get to the server, want 1", n)
	}
}

// A poll the server does not answer within PollWait does not hold the
// agent, nor fail its tasks/get: it gets the record as it stands. The
// proxy reaches the engine through the owner's socket, as
// `taskdeck proxy --stdio` does, where a late PollNow is an error.
func TestTasksGetLatePollAnswersFromRecord(t *testing.T) {
	srv := hostile.Start(t, demo.Options{Hold: true, NoPush: true, PollInterval: 50 * time.Millisecond})
	config := fmt.Sprintf(`{"mcpServers":{"demo":{"url":%q}}}`, srv.URL)
	r := startRigWith(t, srv, config, Options{}, quietEngine)
	_, a := rpc(t, r.url, "tools/call", `{"name":"hold","arguments":{"steps":3},"_meta":`+metaJSON("a", true)+`}`, nil)
	id := str(a.Result["taskId"])

	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	dir := t.TempDir()
	if _, err := service.Serve(ctx, dir, r.eng, nil); err != nil {
		t.Fatal(err)
	}
	remote, err := service.Dial(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { remote.Close() })
	cfg, err := mcpconfig.ParseConfig("test.json", []byte(config))
	if err != nil {
		t.Fatal(err)
	}
	// The same key as the rig's proxy, as every proxy of a store derives it.
	popts := Options{Deck: remote, Config: cfg, PollWait: 200 * time.Millisecond, HandleKey: HandleKeyFrom(r.eng.AuditKey())}
	withTestAgent(cfg, &popts)
	p := New(popts)
	t.Cleanup(func() { p.Close() })
	ts := httptest.NewServer(handler(t, p))
	t.Cleanup(ts.Close)
	viaSocket := &rig{srv: srv, eng: r.eng, url: ts.URL + "/mcp/demo"}

	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	srv.On("tasks/get", hostile.Stall(stop))
	pastInterval(t, r, id)
	start := time.Now()
	a = agentGet(t, viaSocket, id)
	took := time.Since(start)
	if str(a.Result["status"]) != "working" || took > waitfor.Scale(5*time.Second) {
		t.Fatalf("with the server silent the agent got %v after %s", a.Result, took)
	}
	if len(srv.Requests("tasks/get")) == 0 {
		t.Fatal("the proxy did not poll")
	}
}

// Between the agent's answers and the server's next word, the record is
// input_required with every request answered. The extension requires
// inputRequests with input_required (the TypeScript client's schema
// refuses the answer without them), so the agent is told the task is
// working, as it is: it waits for its server, not for the agent. Here the
// server's tasks/get is stalled, so that the proxy answers from the
// record as it stands after the answers.
func TestTasksGetAfterAllAnsweredIsWorking(t *testing.T) {
	srv := hostile.Start(t, demo.Options{NoPush: true, PollInterval: 50 * time.Millisecond})
	r := startRigWith(t, srv, fmt.Sprintf(`{"mcpServers":{"demo":{"url":%q}}}`, srv.URL), Options{PollWait: 200 * time.Millisecond}, quietEngine)
	m := metaJSON("a", true)
	_, a := rpc(t, r.url, "tools/call", `{"name":"survey","arguments":{},"_meta":`+m+`}`, nil)
	id := str(a.Result["taskId"])
	var reqs map[string]json.RawMessage
	until(t, "both survey questions", func() bool {
		a = agentGet(t, r, id)
		reqs = nil
		_ = json.Unmarshal(a.Result["inputRequests"], &reqs)
		return len(reqs) == 2
	})
	answers := map[string]string{"contact": `{"email":"a@example.com","plan":"pro"}`, "rating": `{"score":9}`}
	var resp []string
	for key := range reqs {
		name, _, _ := strings.Cut(key, "-")
		resp = append(resp, fmt.Sprintf(`%q:{"action":"accept","content":%s}`, key, answers[name]))
	}
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	srv.On("tasks/get", hostile.Stall(stop))
	if _, a := rpc(t, r.url, "tasks/update", `{"taskId":"`+id+`","inputResponses":{`+strings.Join(resp, ",")+`},"_meta":`+m+`}`, nil); a.Error != nil {
		t.Fatal(a.Error.Message)
	}
	pastInterval(t, r, id)
	a = agentGet(t, r, id)
	if e, _ := r.eng.Get(context.Background(), id); e.Task.Status != model.StatusInputRequired {
		t.Fatalf("the record is %s, not input_required with both answered: the test lost its window", e.Task.Status)
	}
	if s := str(a.Result["status"]); s != "working" || a.Result["inputRequests"] != nil {
		t.Fatalf("with both questions answered and the server not heard since, the agent was told %s with inputRequests %s; want working", s, a.Result["inputRequests"])
	}
}
