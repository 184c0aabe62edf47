package proxy

import (
	"bufio"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/internal/clitest"
	"github.com/taskdeck/taskdeck/internal/hostile"
	"github.com/taskdeck/taskdeck/internal/nodetest"
	"github.com/taskdeck/taskdeck/internal/waitfor"
	"github.com/taskdeck/taskdeck/model"
)

// agentDir installs the TypeScript test agent (testdata/agent, its
// versions pinned by package-lock.json) once (see nodetest.Install).
func agentDir(t *testing.T) string {
	t.Helper()
	return nodetest.Install(t, filepath.Join("testdata", "agent"), "agent.mjs", "legacy.mjs")
}

// startAgent runs the agent; it is killed by its pid when the test ends.
func startAgent(t *testing.T, dir string, args ...string) (*exec.Cmd, *bufio.Scanner) {
	t.Helper()
	return startAgentEnv(t, dir, nil, args...)
}

// startAgentEnv is startAgent with env added to the agent's environment.
func startAgentEnv(t *testing.T, dir string, env []string, args ...string) (*exec.Cmd, *bufio.Scanner) {
	t.Helper()
	return startScript(t, dir, env, "agent.mjs", args...)
}

// startScript runs one of the agents' scripts as startAgentEnv runs
// agent.mjs; a token in env overrides the test agent's.
func startScript(t *testing.T, dir string, env []string, script string, args ...string) (*exec.Cmd, *bufio.Scanner) {
	t.Helper()
	cmd := exec.Command("node", append([]string{script}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "TASKDECK_AGENT_TOKEN="+testToken), env...)
	cmd.Stderr = &testWriter{t}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	return cmd, bufio.NewScanner(stdout)
}

type testWriter struct{ t *testing.T }

func (w *testWriter) Write(p []byte) (int, error) {
	w.t.Logf("agent: %s", strings.TrimSpace(string(p)))
	return len(p), nil
}

// agentLine is one outcome the agent printed.
type agentLine struct {
	Tool      string `json:"tool"`
	Kind      string `json:"kind"`
	TaskID    string `json:"taskId"`
	Status    string `json:"status"`
	IsError   bool   `json:"isError"`
	Text      string `json:"text"`
	Input     string `json:"input"`
	Cancelled bool   `json:"cancelled"`
}

// The official TypeScript client, with the official tasks requester,
// through the proxy: every demo tool completes or fails as it should (an
// input request inside a task answered by tasks/update, two at once for
// survey, one before the task answered by an MRTR retry, deploy's
// arguments sent as headers too, instant ended before its handle), a
// cancel ends in cancelled, and every record holds what the agent was
// told and names the agent.
func TestTypeScriptClientTaskFlows(t *testing.T) {
	tsFlows(t, "flows")
}

// The same flows, the agent answering every form with a field it does not
// name as well: the answers reach the server as sent (by tasks/update and
// by the MRTR retry), and every flow ends as before.
func TestTypeScriptClientAnswersWithExtraFields(t *testing.T) {
	r := tsFlows(t, "flows-extra")
	var by []string
	for _, req := range r.srv.Requests("") {
		if strings.Contains(string(req.Body), "not in the form") {
			by = append(by, req.Method)
		}
	}
	if !slices.Contains(by, "tasks/update") || !slices.Contains(by, "tools/call") {
		t.Fatalf("the answers with an extra field reached the server by %q; want tasks/update and tools/call", by)
	}
}

// tsFlows runs the agent's scenario through the proxy and checks what it
// was told against the records.
func tsFlows(t *testing.T, scenario string) *rig {
	dir := agentDir(t)
	r := startRig(t, demo.Options{}, Options{})
	cmd, lines := startAgent(t, dir, r.url, scenario)
	var got []string
	byTask := map[string]agentLine{}
	var calls []agentLine
	inputs := map[string][]string{}
	for lines.Scan() {
		got = append(got, lines.Text())
		t.Log(lines.Text())
		var l agentLine
		if err := json.Unmarshal(lines.Bytes(), &l); err != nil {
			t.Fatalf("the agent printed %q: %v", lines.Text(), err)
		}
		switch {
		case l.Input != "":
			inputs[l.Tool] = append(inputs[l.Tool], l.Input)
		case l.Tool != "":
			calls = append(calls, l)
			// The agent's task id is the record's id and a secret.
			rid, _, _ := strings.Cut(l.TaskID, handleSep)
			byTask[rid] = l
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the agent failed (%v): %s", err, strings.Join(got, "\n"))
	}
	// What the agent was told, call by call, in its order.
	want := []string{
		"echo immediate completed hello",
		"sleep task completed slept 1 s",
		"pipeline task completed pipeline finished: 2 stages",
		"approve task completed approved ship: ts says yes",
		"confirm_first task completed confirmed",
		"fail task failed simulated failure",
		"fail task completed(isError) simulated tool failure",
		"survey task completed survey: email=ts@example.com plan=pro score=9",
		"deploy task completed deployed to eu-west at priority 7; headers seen: Mcp-Param-Region=eu-west Mcp-Param-Priority=7",
		"instant task completed instant: now",
		"instant task failed instant failure",
		"sleep task cancelled",
	}
	var told []string
	for _, c := range calls {
		status := c.Status
		if c.IsError {
			status += "(isError)"
		}
		if c.Cancelled {
			status = "cancelled"
		}
		told = append(told, strings.TrimSpace(strings.Join([]string{c.Tool, c.Kind, status, c.Text}, " ")))
	}
	if strings.Join(told, "\n") != strings.Join(want, "\n") {
		t.Errorf("the agent was told:\n%s\nwant:\n%s", strings.Join(told, "\n"), strings.Join(want, "\n"))
	}
	if q := strings.Join(inputs["survey"], " | "); !strings.Contains(q, "How can we reach you") || !strings.Contains(q, "How would you rate us") {
		t.Errorf("survey asked the agent %q, want both questions", q)
	}
	for _, tool := range []string{"approve", "confirm_first"} {
		if len(inputs[tool]) != 1 {
			t.Errorf("%s asked the agent %q, want one question", tool, inputs[tool])
		}
	}

	list, err := r.eng.List(context.Background(), deck.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != len(want) {
		t.Fatalf("%d records for the agent's %d calls", len(list), len(want))
	}
	for _, e := range list {
		rec := e.Task
		if rec.Agent != "ts-agent" || rec.Owner != "test" {
			t.Errorf("record %s (%s) names agent %q, owner %q", rec.ID, rec.Tool, rec.Agent, rec.Owner)
		}
		if rec.Tool == "echo" {
			continue
		}
		l, ok := byTask[rec.ID]
		if !ok {
			t.Errorf("the agent never saw record %s (%s) as its task id", rec.ID, rec.Tool)
			continue
		}
		if l.Tool != rec.Tool {
			t.Errorf("record %s is %s, the agent called %s", rec.ID, rec.Tool, l.Tool)
		}
		switch {
		case l.Cancelled:
			if rec.Status != model.StatusCancelled {
				t.Errorf("record %s (%s) is %s, the agent was told cancelled", rec.ID, rec.Tool, rec.Status)
			}
		case l.Status == "failed":
			if rec.Status != model.StatusFailed || rec.Error == nil || rec.Error.Message != l.Text {
				t.Errorf("record %s (%s) is %s with error %+v, the agent was told failed: %s", rec.ID, rec.Tool, rec.Status, rec.Error, l.Text)
			}
		default:
			if rec.Status != model.StatusCompleted || rec.IsError != l.IsError || !strings.Contains(string(rec.Result), l.Text) {
				t.Errorf("record %s (%s) is %s (isError %v) with result %s, the agent was told %s", rec.ID, rec.Tool, rec.Status, rec.IsError, rec.Result, l.Text)
			}
		}
	}
	return r
}

// The agent killed with SIGKILL while its held call runs: the task is
// followed to its end and its result kept.
func TestTypeScriptAgentKilledMidHold(t *testing.T) {
	dir := agentDir(t)
	r := startRig(t, demo.Options{Speed: 1}, Options{})
	cmd, _ := startAgent(t, dir, r.url, "hold", "sleep", `{"seconds":2}`)
	rec := only(t, r.eng)
	until(t, "the task handle", func() bool {
		e, err := r.eng.Get(context.Background(), rec.ID)
		return err == nil && e.Task.TaskID != ""
	})
	if err := syscall.Kill(cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if e, _ := r.eng.Get(context.Background(), rec.ID); e.Task.Status != model.StatusWorking {
		t.Fatalf("the task is %s when the agent dies, want working (the test must kill it mid-task)", e.Task.Status)
	}
	var last deck.Entry
	waitfor.Within(t, 15*time.Second, "the task to complete after the agent died", func() bool {
		e, err := r.eng.Get(context.Background(), rec.ID)
		last = e
		return err == nil && e.Task.Status == model.StatusCompleted && strings.Contains(string(e.Task.Result), "slept")
	})
	if last.Task.Agent != "ts-agent" {
		t.Fatalf("record names agent %q", last.Task.Agent)
	}
}

// An agent killed mid-hold and restarted calls again: with its
// idempotency key (the Idempotency-Key header), or without one on a
// server whose config re-attaches the tool, the retry is held on the
// first task. The server got one tools/call, there is one record, and
// the second run receives the first task's result.
func TestTypeScriptAgentRetryFindsItsTask(t *testing.T) {
	dir := agentDir(t)
	for _, c := range []struct {
		name     string
		reattach string
		env      []string
	}{
		{"idempotency key", "", []string{"TASKDECK_IDEMPOTENCY_KEY=deploy-42"}},
		{"reattach", `,"reattach":["approve"]`, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := hostile.Start(t, demo.Options{Speed: 0.05, PollInterval: 20 * time.Millisecond})
			logs := &clitest.SyncBuf{}
			r := startRigWith(t, srv, `{"mcpServers":{"demo":{"url":"`+srv.URL+`"`+c.reattach+`}}}`,
				Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
			args := []string{r.url, "hold", "approve", `{"action":"ship"}`}
			first, _ := startAgentEnv(t, dir, c.env, args...)
			var rec *model.Task
			until(t, "the first call waiting for the operator", func() bool {
				rec = only(t, r.eng)
				return rec.Status == model.StatusInputRequired && len(rec.PendingInputs()) > 0
			})
			if err := syscall.Kill(first.Process.Pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			_ = first.Wait()

			second, lines := startAgentEnv(t, dir, c.env, args...)
			until(t, "the retry re-attached", func() bool { return strings.Contains(logs.String(), "repeat=true") })
			key := rec.PendingInputs()[0]
			if _, err := r.eng.Answer(context.Background(), rec.ID, map[string]json.RawMessage{
				key: json.RawMessage(`{"action":"accept","content":{"approve":true,"reason":"once"}}`)}); err != nil {
				t.Fatal(err)
			}
			var got []string
			for lines.Scan() {
				got = append(got, lines.Text())
			}
			if err := second.Wait(); err != nil {
				t.Fatalf("the second agent failed (%v): %s", err, strings.Join(got, "\n"))
			}
			if out := strings.Join(got, "\n"); !strings.Contains(out, "approved ship: once") {
				t.Fatalf("the second run was told %s, want the first task's result", out)
			}
			if list, err := r.eng.List(context.Background(), deck.Filter{}); err != nil || len(list) != 1 {
				t.Fatalf("%d records (%v) for one call made twice", len(list), err)
			}
			if n := len(srv.Requests("tools/call")); n != 1 {
				t.Fatalf("the server got %d tools/call for one call made twice", n)
			}
		})
	}
}
