package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/internal/clitest"
	"github.com/taskdeck/taskdeck/internal/hostile"
	"github.com/taskdeck/taskdeck/internal/waitfor"
)

// Invariant 11: once its intent is committed, a call belongs to the owner.
// In each test below the server takes a tools/call (its task is created)
// and holds the answer; the caller leaves; then the server answers. The
// owner must take the handle and watch the task to its end, never leave
// it orphaned.

// slowCallDeck is a deck on a demo server that holds the answer to every
// tools/call until the gate is released.
func slowCallDeck(t *testing.T) (*deck, *hostile.Server, *hostile.Gate) {
	t.Helper()
	srv := hostile.Start(t, demo.Options{Speed: 0.05})
	gate := srv.HoldAnswer("tools/call")
	t.Cleanup(gate.Release)
	d := newDeck(t)
	d.writeConfig(fmt.Sprintf(`{"mcpServers":{"build":{"url":%q}},"agents":{"leaver":{"token":"${LEAVER_TOKEN}","servers":["build"]}}}`, srv.URL))
	d.env = append(d.env, "LEAVER_TOKEN="+leaverToken)
	return d, srv, gate
}

// leaverToken is the agent's token on the proxy (the config's "leaver").
const leaverToken = "leaver-agent-token-0123456789abcdef"

// sleepCall is a tools/call of sleep by an agent with the tasks extension.
const sleepCall = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"sleep","arguments":{"seconds":1},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"leaver","version":"1"},"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}}}`

// taskCreated waits until the server has created the call's task.
func taskCreated(t *testing.T, srv *hostile.Server) {
	t.Helper()
	clitest.WaitFor(t, "the server to create the task", func() bool { return srv.Demo.Stats().TasksCreated == 1 })
}

// answerAfterLeaving releases the server's answer once the caller's
// leaving has reached the owner: an owner that gives up on the call hangs
// up on the server, which the gate counts. One that keeps the call shows
// nothing, so after a second the answer goes anyway (a busier machine
// only makes this test weaker, never fail wrongly).
func answerAfterLeaving(gate *hostile.Gate) {
	waitfor.Until(time.Second, 10*time.Millisecond, func() bool { return gate.Abandoned() > 0 })
	gate.Release()
}

// endsCompleted checks that the one sleep record reaches completed with
// its result (get refreshes it from the server), failing at once if it
// was orphaned.
func (d *deck) endsCompleted(gate *hostile.Gate) {
	d.t.Helper()
	var last task
	clitest.WaitFor(d.t, "the call's task to end completed", func() bool {
		tasks := d.ls()
		if len(tasks) != 1 {
			d.t.Fatalf("want one record, got %d: %+v", len(tasks), tasks)
		}
		if tasks[0].Status == "orphaned" {
			d.t.Fatalf("the call was abandoned (the server was hung up on %d times): %s: %s", gate.Abandoned(), tasks[0].StatusMessage, tasks[0].LocalError)
		}
		last = d.getJSON(tasks[0].ID)
		return last.Status == "completed"
	})
	if last.TaskID == "" || last.resultText() != "slept 1 s" {
		d.t.Fatalf("completed without the server's task or result: task %q, result %q", last.TaskID, last.resultText())
	}
}

// TestCallOwnedWhenHTTPAgentHangsUp: an agent hangs up on `serve --proxy`
// while its tools/call is on the server.
func TestCallOwnedWhenHTTPAgentHangsUp(t *testing.T) {
	t.Parallel()
	d, srv, gate := slowCallDeck(t)
	_, base := d.serveProxy()

	ctx, hangUp := context.WithCancel(context.Background())
	defer hangUp()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/mcp/build", strings.NewReader(sleepCall))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", "sleep")
	req.Header.Set("Authorization", "Bearer "+leaverToken)
	done := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		done <- err
	}()
	taskCreated(t, srv)
	hangUp()
	<-done
	answerAfterLeaving(gate)
	d.endsCompleted(gate)
}

// stdioAgent runs `proxy --stdio build` (the store's owner) and sends it
// the sleep call; the returned pipe end is the agent's stdin writer.
func stdioAgent(t *testing.T, d *deck, srv *hostile.Server) (*proc, *os.File) {
	t.Helper()
	agentEnd, stdin, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); agentEnd.Close() })
	px := startTDWithStdin(t, d.env, agentEnd, d.args([]string{"proxy", "--stdio", "build"})...)
	if _, err := stdin.WriteString(sleepCall + "\n"); err != nil {
		t.Fatal(err)
	}
	taskCreated(t, srv)
	return px, stdin
}

// TestCallOwnedWhenStdioAgentClosesStdin: the agent of `proxy --stdio`
// closes its end mid-call; the proxy finishes the call before it exits.
func TestCallOwnedWhenStdioAgentClosesStdin(t *testing.T) {
	t.Parallel()
	d, srv, gate := slowCallDeck(t)
	px, stdin := stdioAgent(t, d, srv)
	stdin.Close()
	answerAfterLeaving(gate)
	select {
	case <-px.done:
	case <-time.After(clitest.CmdTimeout):
		t.Fatalf("proxy --stdio still runs %s after its stdin closed", clitest.CmdTimeout)
	}
	if px.Code != exitOK {
		t.Fatalf("proxy --stdio exit %d: %s", px.Code, px.Stderr)
	}
	d.endsCompleted(gate)
}

// TestCallOwnedWhenStdioAgentCancels: the agent sends
// notifications/cancelled for its call, as MCP clients do on their own
// timeouts, and stays connected.
func TestCallOwnedWhenStdioAgentCancels(t *testing.T) {
	t.Parallel()
	d, srv, gate := slowCallDeck(t)
	px, stdin := stdioAgent(t, d, srv)
	if _, err := stdin.WriteString(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"reason":"timeout"}}` + "\n"); err != nil {
		t.Fatal(err)
	}
	answerAfterLeaving(gate)
	d.endsCompleted(gate)
	if px.exited() {
		t.Fatalf("proxy --stdio exited (%d) though its agent is connected: %s", px.Code, px.Stderr)
	}
}

// TestCallOwnedWhenCallIsKilled: `taskdeck call` is SIGKILLed while its
// call, made through the `serve` owner, is on the server.
func TestCallOwnedWhenCallIsKilled(t *testing.T) {
	t.Parallel()
	d, srv, gate := slowCallDeck(t)
	d.serve()
	c := d.start("call", "--server", "build", "sleep", "--args", `{"seconds":1}`)
	taskCreated(t, srv)
	c.kill()
	answerAfterLeaving(gate)
	d.endsCompleted(gate)
}
