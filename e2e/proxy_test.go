package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/taskdeck/taskdeck/internal/clitest"
	"github.com/taskdeck/taskdeck/internal/waitfor"
)

// TestHeldAgentAnsweredFromAnotherShell: an agent without the tasks
// extension (go-sdk's client) calls the demo's approve tool through
// `taskdeck serve --proxy`; its call blocks while the task waits for
// input; `taskdeck answer` from another shell answers it; the agent then
// receives the final result as an ordinary tool result, and `taskdeck get
// --json` names the agent that made the call.
func TestHeldAgentAnsweredFromAnotherShell(t *testing.T) {
	t.Parallel()
	srv := startDemo(t, "127.0.0.1:0")
	d := newDeck(t)
	d.writeConfig(fmt.Sprintf(`{"mcpServers":{"build":{"url":%q}},"agents":{"e2e":{"token":"${E2E_AGENT_TOKEN}","servers":["build"]}}}`, srv.url))
	const token = "e2e-agent-token-0123456789abcdef"
	d.env = append(d.env, "E2E_AGENT_TOKEN="+token)
	_, base := d.serveProxy()

	ctx, cancel := context.WithTimeout(context.Background(), clitest.WaitTimeout)
	defer cancel()
	cs := connectAgent(ctx, t, base+"/mcp/build", "e2e-agent", token)
	type out struct {
		res *mcp.CallToolResult
		err error
	}
	done := make(chan out, 1)
	go func() {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "approve", Arguments: map[string]any{"action": "deploy"}})
		done <- out{res, err}
	}()

	var waiting task
	clitest.WaitFor(t, "the held task waiting for input", func() bool {
		for _, tk := range d.ls() {
			if tk.Tool == "approve" && tk.Status == "input_required" && len(tk.InputRequests) > 0 {
				waiting = tk
				return true
			}
		}
		return false
	})
	select {
	case o := <-done:
		t.Fatalf("the agent's call returned before anyone answered: %+v %v", o.res, o.err)
	default:
	}
	var key string
	for k := range waiting.InputRequests {
		key = k
	}
	d.run("answer", waiting.ID, key, `{"action":"accept","content":{"approve":true,"reason":"from the shell"}}`).Must(t, exitOK)

	var o out
	select {
	case o = <-done:
	case <-time.After(clitest.WaitTimeout):
		t.Fatal("the agent's call did not return after the answer")
	}
	if o.err != nil {
		t.Fatal(o.err)
	}
	var text []string
	for _, c := range o.res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text = append(text, tc.Text)
		}
	}
	if got := strings.Join(text, " "); o.res.IsError || !strings.Contains(got, "approved deploy: from the shell") {
		t.Fatalf("the agent got %q (isError %v), want the approval", got, o.res.IsError)
	}
	rec := d.getJSON(waiting.ID)
	if rec.Status != "completed" {
		t.Fatalf("the record is %s, want completed", rec.Status)
	}
	if agent := string(rec.raw["agent"]); agent != `"e2e-agent"` {
		t.Fatalf("get --json names agent %s, want \"e2e-agent\"", agent)
	}
}

// connectAgent connects go-sdk's client, named clientName, to a proxy
// endpoint with an agent's token; the session ends with the test.
func connectAgent(ctx context.Context, t *testing.T, endpoint, clientName, token string) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: clientName, Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, MaxRetries: -1, HTTPClient: &http.Client{Transport: bearer(token)}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// bearer is a transport that sends an agent's token.
type bearer string

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}

// TestStdioProxyWatchesOpenTasks: `taskdeck proxy --stdio` that owns the
// store (no serve runs) watches every open task while the agent is
// connected, as serve would: a task launched earlier by a plain `call`
// (which polls nothing) reaches its end in the store without anyone
// asking for it.
func TestStdioProxyWatchesOpenTasks(t *testing.T) {
	t.Parallel()
	srv := startDemo(t, "127.0.0.1:0", "--no-push")
	d := newDeck(t)
	d.writeConfig(fmt.Sprintf(`{"mcpServers":{"build":{"url":%q}}}`, srv.url))
	r := d.run("call", "--server", "build", "sleep", "--args", `{"seconds":1}`).Must(t, exitOK)
	id := strings.Fields(r.Stdout)[0]

	// The agent's end of the pipe stays open and silent for the test.
	agentEnd, stdin, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); agentEnd.Close() })
	px := startTDWithStdin(t, d.env, agentEnd, d.args([]string{"proxy", "--stdio", "build"})...)
	clitest.WaitFor(t, "the proxy's engine to see the sleep end", func() bool {
		if px.exited() {
			t.Fatalf("the proxy exited (%d): %s", px.Code, px.Stderr)
		}
		for _, tk := range d.ls() { // ls polls nothing: what the proxy's engine wrote
			if tk.ID == id {
				return tk.Status == "completed"
			}
		}
		return false
	})
}

// TestStdioProxyTakesOverWhenTheOwnerExits: an agent's `proxy --stdio`
// that started while another process owned the store (here a first
// agent's proxy) works through that owner; when the owner exits, the
// second proxy becomes the owner and its engine watches the open task to
// its end, though its own agent sends nothing.
func TestStdioProxyTakesOverWhenTheOwnerExits(t *testing.T) {
	t.Parallel()
	srv := startDemo(t, "127.0.0.1:0", "--no-push")
	d := newDeck(t)
	d.writeConfig(fmt.Sprintf(`{"mcpServers":{"build":{"url":%q}}}`, srv.url))
	// Long enough to outlast the hand-over on a slow machine: the task
	// must still be working when the first proxy exits.
	speed, _ := strconv.ParseFloat(demoSpeed, 64)
	seconds := waitfor.Scale(5*time.Second).Seconds() / speed
	r := d.run("call", "--server", "build", "sleep", "--args", fmt.Sprintf(`{"seconds":%g}`, seconds)).Must(t, exitOK)
	id := strings.Fields(r.Stdout)[0]
	logged := func(what string) bool {
		log, _ := os.ReadFile(filepath.Join(d.dataDir, "taskdeck.log"))
		return strings.Contains(string(log), what)
	}
	agent := func() (*os.File, *os.File) { // an agent's pipe, open and silent
		end, stdin, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { stdin.Close(); end.Close() })
		return end, stdin
	}

	firstEnd, firstStdin := agent()
	first := startTDWithStdin(t, d.env, firstEnd, d.args([]string{"proxy", "--stdio", "build", "--agent", "first"})...)
	clitest.WaitFor(t, "the first proxy to own the store and poll the task", func() bool {
		if first.exited() {
			t.Fatalf("the first proxy exited (%d): %s", first.Code, first.Stderr)
		}
		return logged("reconcile: every open task checked")
	})
	secondEnd, _ := agent()
	second := startTDWithStdin(t, d.env, secondEnd, d.args([]string{"--verbose", "proxy", "--stdio", "build", "--agent", "second"})...)
	clitest.WaitFor(t, "the second proxy to work through the first", func() bool {
		if second.exited() {
			t.Fatalf("the second proxy exited (%d): %s", second.Code, second.Stderr)
		}
		return logged("working through the owner")
	})

	firstStdin.Close() // the first agent hangs up: its proxy exits
	select {
	case <-first.done:
	case <-time.After(clitest.WaitTimeout):
		t.Fatal("the first proxy did not exit after its agent hung up")
	}
	for _, tk := range d.ls() {
		if tk.ID == id && tk.Status != "working" {
			t.Fatalf("the task is %s when the first proxy exited: this machine is slower than TASKDECK_TEST_SLOWDOWN allows for", tk.Status)
		}
	}
	clitest.WaitFor(t, "the second proxy's engine to see the sleep end", func() bool {
		if second.exited() {
			t.Fatalf("the second proxy exited (%d): %s", second.Code, second.Stderr)
		}
		for _, tk := range d.ls() { // ls polls nothing: what the second proxy's engine wrote
			if tk.ID == id {
				return tk.Status == "completed"
			}
		}
		return false
	})
}
