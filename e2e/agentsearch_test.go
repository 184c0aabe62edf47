package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/taskdeck/taskdeck/internal/clitest"
)

// TestSearchAgentAndKeyGetByKey: an agent's call through `serve --proxy`
// (with its idempotency key) and a local `call --key`: `ls --search`
// finds each by agent: and key:, a misspelt field is an error naming the
// fields (exit 2), not "no tasks"; `get` takes a key, and says who
// launched the record and through what (`launchedBy` in --json).
func TestSearchAgentAndKeyGetByKey(t *testing.T) {
	t.Parallel()
	srv := startDemo(t, "127.0.0.1:0")
	d := newDeck(t)
	d.writeConfig(fmt.Sprintf(`{"mcpServers":{"build":{"url":%q}},"agents":{"ci":{"token":"${E2E_AGENT_TOKEN}","servers":["build"]}}}`, srv.url))
	const token = "e2e-agent-token-0123456789abcdef"
	d.env = append(d.env, "E2E_AGENT_TOKEN="+token)
	_, base := d.serveProxy()

	ctx, cancel := context.WithTimeout(context.Background(), clitest.WaitTimeout)
	defer cancel()
	cs := connectAgent(ctx, t, base+"/mcp/build", "nightly-agent", token)
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "from the agent"},
		Meta: mcp.Meta{"io.taskdeck/idempotencyKey": "nightly-1"}}); err != nil {
		t.Fatal(err)
	}
	local := clitest.OnlyID(t, d.run("call", "--server", "build", "echo", "--args", `{"text":"from the shell"}`, "--key", "local-1").Must(t, exitOK))

	// ls has an AGENT column, as the dashboard's table, once a record names an agent.
	table := strings.Split(strings.TrimSpace(d.run("ls").Must(t, exitOK).Stdout), "\n")
	col := strings.Index(table[0], "AGENT")
	if len(table) != 3 || col < 0 {
		t.Fatalf("ls: want a header with AGENT and two rows:\n%s", strings.Join(table, "\n"))
	}
	for _, row := range table[1:] {
		want := "nightly-agent"
		if strings.HasPrefix(row, local) {
			want = "-" // the shell's own call names no agent
		}
		if got := strings.Fields(row[col:])[0]; got != want {
			t.Errorf("ls: AGENT %q, want %q:\n%s", got, want, strings.Join(table, "\n"))
		}
	}

	for search, want := range map[string]string{"agent:nightly": "from the agent", "key:local-1": "from the shell", "-agent:nightly": "from the shell"} {
		r := d.run("ls", "--search", search, "--json").Must(t, exitOK)
		if lines := strings.Split(strings.TrimSpace(r.Stdout), "\n"); len(lines) != 1 || !strings.Contains(lines[0], want) {
			t.Fatalf("ls --search %s: want the one task %q\n%s", search, want, r)
		}
	}
	r := d.run("ls", "--search", "agnet:nightly").Must(t, exitUsage)
	clitest.OneErrorLine(t, r, `"agnet" is not a search field`, "did you mean agent:?", "agent, key")
	d.run("ls", "--search", "text:from").Must(t, exitOK) // {"text":...} in the arguments: a plain word

	r = d.run("get", "proxy:ci:nightly-1").Must(t, exitOK)
	clitest.MustContain(t, r, r.Stdout, "from the agent", "launched by:   agent ci (nightly-agent), through the proxy")
	r = d.run("get", "local-1", "--json").Must(t, exitOK)
	var rec struct {
		Args       json.RawMessage `json:"arguments"`
		LaunchedBy struct{ Name, Role string }
	}
	if err := json.Unmarshal([]byte(r.Stdout), &rec); err != nil || !strings.Contains(string(rec.Args), "from the shell") || rec.LaunchedBy.Role != "user" || rec.LaunchedBy.Name == "" {
		t.Fatalf("get KEY --json: want the shell's call, launched by the user (%v)\n%s", err, r)
	}
	r = d.run("get", "no-such-key").Must(t, exitUsage)
	clitest.OneErrorLine(t, r, `no task has the id or the idempotency key "no-such-key"`)
}
