package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os/user"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskdeck/taskdeck/internal/clitest"
	"github.com/taskdeck/taskdeck/internal/pgtest"
	"github.com/taskdeck/taskdeck/model"
)

// TestAuditScriptedSessionOnAFleet: a session on a PostgreSQL fleet, each
// act by a different party: agents a and b through host A's proxy (a's
// echo; b's approve, held for an answer), the operator answering b's
// question at host A's command line, and host B (another data directory
// on the same database) calling a sleep and cancelling it. Every act is
// in `taskdeck audit --json` with its actor, in the order made, read from
// either host; `audit verify` passes; then b's record and its entry are
// rewritten by SQL with the chain recomputed, and `audit verify` exits 6
// naming the entry, by the seal under the fleet's audit key.
func TestAuditScriptedSessionOnAFleet(t *testing.T) {
	t.Parallel()
	db := pgtest.DB(t)
	srv := startDemo(t, "127.0.0.1:0")
	const tokenA, tokenB = "e2e-agent-a-token-0123456789abcdef", "e2e-agent-b-token-0123456789abcdef"
	key := "TASKDECK_AUDIT_KEY=" + strings.Repeat("5e", 32)

	hostA := newDeck(t)
	hostA.writeConfig(fmt.Sprintf(`{"store":%q,"mcpServers":{"build":{"url":%q}},"agents":{
		"a":{"token":"${E2E_TOKEN_A}","servers":["build"]},
		"b":{"token":"${E2E_TOKEN_B}","servers":["build"]}}}`, db, srv.url))
	hostA.env = append(hostA.env, key, "E2E_TOKEN_A="+tokenA, "E2E_TOKEN_B="+tokenB)
	_, base := hostA.serveProxy()
	hostB := newDeck(t)
	hostB.writeConfig(fmt.Sprintf(`{"store":%q,"mcpServers":{"build":{"url":%q}}}`, db, srv.url))
	hostB.env = append(hostB.env, key)

	ctx, cancel := context.WithTimeout(context.Background(), clitest.WaitTimeout)
	defer cancel()
	agent := func(name, token string) *mcp.ClientSession {
		return connectAgent(ctx, t, base+"/mcp/build", "e2e-"+name, token)
	}

	// 1. Agent a's call.
	if res, err := agent("a", tokenA).CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "from a"}}); err != nil || res.IsError {
		t.Fatalf("agent a's echo: %+v, %v", res, err)
	}
	// 2. Agent b's call, held until 3. the operator answers it at host A.
	done := make(chan error, 1)
	go func() {
		_, err := agent("b", tokenB).CallTool(ctx, &mcp.CallToolParams{Name: "approve", Arguments: map[string]any{"action": "deploy"}})
		done <- err
	}()
	var waiting task
	clitest.WaitFor(t, "b's approve waiting for input", func() bool {
		for _, tk := range hostA.ls() {
			if tk.Tool == "approve" && tk.Status == "input_required" && len(tk.InputRequests) > 0 {
				waiting = tk
				return true
			}
		}
		return false
	})
	var question string
	for k := range waiting.InputRequests {
		question = k
	}
	hostA.run("answer", waiting.ID, question, `{"action":"accept","content":{"approve":true,"reason":"operator says yes"}}`).Must(t, exitOK)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("agent b's approve: %v", err)
		}
	case <-time.After(clitest.WaitTimeout):
		t.Fatal("agent b's approve did not return after the answer")
	}
	// 4. Host B calls a sleep and 5. cancels it.
	r := hostB.run("call", "--server", "build", "sleep", "--args", `{"seconds":600}`).Must(t, exitOK)
	sleepID := strings.Fields(r.Stdout)[0]
	hostB.run("cancel", sleepID).Must(t, exitOK)

	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	type act struct{ kind, name, role, tool string }
	want := []act{
		{model.ActCall, "a", model.RoleAgent, "echo"},
		{model.ActCall, "b", model.RoleAgent, "approve"},
		{model.ActAnswer, me.Username, model.RoleUser, "approve"},
		{model.ActCall, me.Username, model.RoleUser, "sleep"},
		{model.ActCancel, me.Username, model.RoleUser, "sleep"},
	}
	tools := map[string]string{waiting.ID: "approve", sleepID: "sleep"}
	for _, tk := range hostA.ls() {
		if tk.Tool == "echo" {
			tools[tk.ID] = "echo"
		}
	}
	for _, h := range []*deck{hostA, hostB} {
		var got []act
		var last uint64
		for line := range strings.Lines(h.run("audit", "--json").Must(t, exitOK).Stdout) {
			var e model.AuditEntry
			if err := json.Unmarshal([]byte(line), &e); err != nil {
				t.Fatalf("audit --json printed %q: %v", line, err)
			}
			if e.Rev <= last || e.Actor.Host == "" {
				t.Fatalf("entry %d after %d, host %q: %s", e.Rev, last, e.Actor.Host, line)
			}
			last = e.Rev
			if e.Actor.Role != model.RoleEngine {
				got = append(got, act{e.Act, e.Actor.Name, e.Actor.Role, tools[e.Task]})
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("the acts in the audit log, in order:\n%v\nwant:\n%v", got, want)
		}
	}
	if out := hostB.run("audit", "verify").Must(t, exitOK).Stdout; !strings.Contains(out, "each sealed with the audit key") {
		t.Fatalf("audit verify: %s", out)
	}

	// Behind taskdeck's back: b's approval made mallory's, its entry made
	// to match, the chain recomputed.
	conn, err := pgx.Connect(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var rev int64
	for _, sql := range []string{
		`UPDATE taskdeck_tasks SET body = convert_to(replace(convert_from(body, 'UTF8'), 'operator says yes', 'mallory says yes'), 'UTF8') WHERE id = $1`,
		`UPDATE taskdeck_audit a SET body = convert_to(regexp_replace(convert_from(a.body, 'UTF8'), '"record":"[0-9a-f]{64}"', '"record":"' || encode(sha256(t.body), 'hex') || '"'), 'UTF8')
			FROM taskdeck_tasks t WHERE t.id = $1 AND a.rev = t.revision`,
	} {
		if _, err := conn.Exec(ctx, sql, waiting.ID); err != nil {
			t.Fatal(err)
		}
	}
	if err := conn.QueryRow(ctx, `SELECT revision FROM taskdeck_tasks WHERE id = $1`, waiting.ID).Scan(&rev); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `DO $$
		DECLARE h bytea := (SELECT audit_cp_hash FROM taskdeck_meta); r record;
		BEGIN
			FOR r IN SELECT rev, body FROM taskdeck_audit ORDER BY rev LOOP
				h := sha256(h || int8send(r.rev) || r.body);
				UPDATE taskdeck_audit SET hash = h WHERE rev = r.rev;
			END LOOP;
			UPDATE taskdeck_meta SET audit = h;
		END $$`); err != nil {
		t.Fatal(err)
	}
	res := hostA.run("audit", "verify")
	wantFault := fmt.Sprintf("audit entry %d (task %s): its seal does not match", rev, waiting.ID)
	if res.Code != exitLocal || !strings.Contains(res.Stderr, wantFault) {
		t.Fatalf("audit verify after the rewrite: exit %d, want %d and %q\n%s%s", res.Code, exitLocal, wantFault, res.Stdout, res.Stderr)
	}
}
