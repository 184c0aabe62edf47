package proxy

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/internal/clitest"
	"github.com/taskdeck/taskdeck/internal/hostile"
	mcpconfig "github.com/taskdeck/taskdeck/mcpclient/config"
	"github.com/taskdeck/taskdeck/model"
)

// Tokens of the two agents the isolation tests configure.
const (
	tokenA = "agent-a-token-0123456789abcdef"
	tokenB = "agent-b-token-0123456789abcdef"
	tokenV = "viewer-token-0123456789abcdef"
	tokenO = "operator-token-0123456789abcdef"
)

// twoAgents is the demo server behind a proxy with agents a and b (both on
// demo), c (on "other" only), the viewer v and the operator o (on demo),
// and a log the test can read.
func twoAgents(t testing.TB) (*rig, *clitest.SyncBuf) {
	t.Helper()
	srv := hostile.Start(t, demo.Options{Speed: 0.05, PollInterval: 20e6})
	logs := &clitest.SyncBuf{}
	cfg := `{"mcpServers":{"demo":{"url":"` + srv.URL + `"},"other":{"url":"` + srv.URL + `"}},
	"agents":{"a":{"token":"${TOKEN_A}","servers":["demo"]},"b":{"token":"${TOKEN_B}","servers":["demo"]},"c":{"token":"${TOKEN_C}","servers":["other"]},
	"v":{"token":"${TOKEN_V}","servers":["demo"],"role":"viewer"},"o":{"token":"${TOKEN_O}","servers":["demo"],"role":"operator"}}}`
	lookup := map[string]string{"TOKEN_A": tokenA, "TOKEN_B": tokenB, "TOKEN_C": "agent-c-token-0123456789abcdef", "TOKEN_V": tokenV, "TOKEN_O": tokenO}
	return startRigWith(t, srv, cfg, Options{
		Logger: slog.New(slog.NewTextHandler(logs, nil)),
		Lookup: func(k string) (string, bool) { v, ok := lookup[k]; return v, ok },
	}), logs
}

func as(token string) map[string]string { return map[string]string{"Authorization": "Bearer " + token} }

// Without a known token every request is 401 on loopback too, with one
// log line that holds no token, the same answer whether the server
// exists or not, nothing sent and nothing recorded. A wrong token, a
// lower-case scheme and a token's prefix are as unknown.
func TestTokenRequired(t *testing.T) {
	r, logs := twoAgents(t)
	call := `{"name":"sleep","arguments":{"seconds":1},"_meta":` + metaJSON("x", true) + `}`
	var bodies []string
	for _, hdr := range []map[string]string{
		{"Authorization": ""}, as("wrong-token-0123456789abcdef"), as(tokenA[:len(tokenA)-1]),
		{"Authorization": "bearer " + tokenA}, {"Authorization": tokenA},
	} {
		for _, url := range []string{r.url, r.base + "/mcp/nonexistent", r.base + "/"} {
			status, a := rpc(t, url, "tools/call", call, hdr)
			if status != http.StatusUnauthorized || a.Error == nil {
				t.Fatalf("%v at %s: HTTP %d %+v, want 401", hdr, url, status, a)
			}
			bodies = append(bodies, a.Error.Message)
		}
	}
	for _, b := range bodies[1:] {
		if b != bodies[0] {
			t.Fatalf("401 answers differ: %q vs %q", b, bodies[0])
		}
	}
	if n := len(r.srv.Requests("")); n != 0 {
		t.Fatalf("the server received %d requests without a token", n)
	}
	if n := len(mustList(t, r)); n != 0 {
		t.Fatalf("%d records without a token", n)
	}
	out := logs.String()
	if got := strings.Count(out, "without a known token"); got != len(bodies) {
		t.Fatalf("%d log lines for %d refusals:\n%s", got, len(bodies), out)
	}
	for _, tok := range []string{tokenA, "wrong-token"} {
		if strings.Contains(out, tok) {
			t.Fatalf("the log holds a token:\n%s", out)
		}
	}
	// With its token, agent a is served.
	if status, a := rpc(t, r.url, "tools/list", `{"_meta":`+metaJSON("a", false)+`}`, as(tokenA)); status != 200 || a.Error != nil {
		t.Fatalf("agent a: HTTP %d %+v", status, a)
	}
}

// An agent may use only its servers: another is answered as a server that
// does not exist, and the list it is given names only its own.
func TestAgentOnlyItsServers(t *testing.T) {
	r, _ := twoAgents(t)
	list := `{"_meta":` + metaJSON("c", false) + `}`
	status, a := rpc(t, r.url, "tools/list", list, as("agent-c-token-0123456789abcdef"))
	if status != http.StatusNotFound || a.Error == nil || strings.Contains(a.Error.Message, "demo,") || !strings.Contains(a.Error.Message, "other") {
		t.Fatalf("agent c on demo: HTTP %d %+v", status, a)
	}
	_, b := rpc(t, r.base+"/mcp/nonexistent", "tools/list", list, as("agent-c-token-0123456789abcdef"))
	if strings.ReplaceAll(a.Error.Message, `"demo"`, `"nonexistent"`) != b.Error.Message {
		t.Fatalf("a server it may not use (%q) is told from none (%q)", a.Error.Message, b.Error.Message)
	}
	if n := len(r.srv.Requests("")); n != 0 {
		t.Fatalf("the server received %d requests", n)
	}
	if status, a := rpc(t, r.base+"/mcp/other", "tools/list", list, as("agent-c-token-0123456789abcdef")); status != 200 || a.Error != nil {
		t.Fatalf("agent c on other: HTTP %d %+v", status, a)
	}
}

// The proxy refuses to start with an agent's variable unset, two agents
// with one token, or no credential at all; the config refuses a token in
// plain text, one variable for two agents, and an unknown role. Each is
// one line that quotes no token.
func TestCredentialsRefusedAtStart(t *testing.T) {
	const secret = "plain-secret-0123456789abcdef"
	for _, c := range []struct{ cfg, want string }{
		{`{"agents":{"a":{"token":"` + secret + `"}}}`, "want a ${VAR} reference"},
		{`{"agents":{"a":{"token":"Bearer ${A}"}}}`, "want a ${VAR} reference"},
		{`{"agents":{"a":{"token":"${A}"},"b":{"token":"${A}"}}}`, "same variable"},
		{`{"agents":{"a":{"token":"${A}","role":"root"}}}`, "unknown role"},
		{`{"agents":{"a":{"token":"${A}","servers":["nope"]}}}`, "no server"},
		{`{"agents":{"a b":{"token":"${A}"}}}`, "agent name"},
		{`{"proxy":{"origins":["evil.example"]}}`, "want an origin"},
	} {
		_, err := mcpconfig.ParseConfig("c.json", []byte(c.cfg))
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want %q", c.cfg, err, c.want)
		}
	}
	env := map[string]string{"A": tokenA, "B": tokenA, "SHORT": "short"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	for _, c := range []struct {
		cfg, token, want string
	}{
		{`{"agents":{"a":{"token":"${UNSET}"}}}`, "", "UNSET is not set"},
		{`{"agents":{"a":{"token":"${A}"},"b":{"token":"${B}"}}}`, "", "the same token"},
		{`{"agents":{"a":{"token":"${A}"}}}`, tokenA, "the same token"},
		{`{"agents":{"a":{"token":"${SHORT}"}}}`, "", "shorter than"},
		{`{}`, "", "admit nobody"},
	} {
		cfg, err := mcpconfig.ParseConfig("c.json", []byte(c.cfg))
		if err != nil {
			t.Fatal(err)
		}
		p := New(Options{Config: cfg, Token: c.token, Lookup: lookup})
		_, err = p.Handler()
		p.Close()
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), tokenA) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want %q", c.cfg, err, c.want)
		}
	}
}

// callAs makes a tasks-agent tools/call of a long sleep as the agent of
// token and returns the task id it is given.
func callAs(t testing.TB, r *rig, token string) string {
	t.Helper()
	_, a := rpc(t, r.url, "tools/call", `{"name":"sleep","arguments":{"seconds":600},"_meta":`+metaJSON("same-label", true)+`}`, as(token))
	if a.Error != nil || str(a.Result["resultType"]) != "task" {
		t.Fatalf("tools/call: %+v", a)
	}
	return str(a.Result["taskId"])
}

// taskReq is a tasks/* request's answer, as raw JSON of its error (or
// result), for comparing answers byte for byte.
func taskReq(t testing.TB, r *rig, token, method, id string) string {
	t.Helper()
	params := `{"taskId":` + quote(id) + `,"inputResponses":{"q":{"action":"accept","content":{}}},"_meta":` + metaJSON("same-label", true) + `}`
	status, a := rpc(t, r.url, method, params, as(token))
	b, _ := json.Marshal(a)
	return fmt.Sprintf("HTTP %d %s", status, b)
}

// Agent b cannot tell agent a's task from one that does not exist:
// tasks/get, tasks/update and tasks/cancel of it (by a's id, by its
// record id alone, by its record id with b's own secret, by a prefix)
// answer as an unknown id does, byte for byte, and nothing reaches the
// server. The operator's own task is as invisible to an agent. A sees its
// task, and the record names a as its owner.
func TestAgentsKeptApart(t *testing.T) {
	r, _ := twoAgents(t)
	idA := callAs(t, r, tokenA)
	idB := callAs(t, r, tokenB)
	recA, _, _ := strings.Cut(idA, handleSep)
	_, secretB, _ := strings.Cut(idB, handleSep)
	e, err := r.eng.Get(context.Background(), recA)
	if err != nil || e.Task.Owner != "a" || e.Task.Agent != "same-label" {
		t.Fatalf("a's record: %+v, %v", e.Task, err)
	}
	op, err := r.eng.Call(context.Background(), deck.CallRequest{Server: model.ServerRef{Name: "demo"}, Tool: "sleep", Args: json.RawMessage(`{"seconds":600}`)})
	if err != nil {
		t.Fatal(err)
	}
	before := map[string]int{"tasks/update": len(r.srv.Requests("tasks/update")), "tasks/cancel": len(r.srv.Requests("tasks/cancel"))}
	unknown := model.NewID(time.Now()) + handleSep + strings.Repeat("a", len(secretB))
	for _, method := range []string{"tasks/get", "tasks/update", "tasks/cancel"} {
		want := taskReq(t, r, tokenB, method, unknown)
		if !strings.Contains(want, "-32602") {
			t.Fatalf("%s of an unknown id: %s", method, want)
		}
		for _, id := range []string{idA, recA, recA + handleSep + secretB, recA[:6], recA[:15], recA[1:], op.Task.ID, op.Task.ID + handleSep + secretB} {
			if got := taskReq(t, r, tokenB, method, id); got != want {
				t.Errorf("b's %s of %s: %s, an unknown id: %s", method, id, got, want)
			}
		}
		if got := taskReq(t, r, tokenA, method, op.Task.ID); got != want {
			t.Errorf("a's %s of the operator's task: %s, want %s", method, got, want)
		}
	}
	for m, n := range before {
		if got := len(r.srv.Requests(m)); got != n {
			t.Fatalf("%d %s reached the server from b", got-n, m)
		}
	}
	if got := taskReq(t, r, tokenA, "tasks/get", idA); !strings.Contains(got, `"status":"working"`) {
		t.Fatalf("a's own tasks/get: %s", got)
	}
	if e, _ := r.eng.Get(context.Background(), recA); e.Task.Status != model.StatusWorking || e.Task.CancelRequested {
		t.Fatalf("a's task after b's tries: %s (cancel requested %v)", e.Task.Status, e.Task.CancelRequested)
	}
}

// countGets counts the records the proxy reads.
type countGets struct {
	deck.Deck
	n atomic.Int64
}

func (c *countGets) Get(ctx context.Context, id string) (deck.Entry, error) {
	c.n.Add(1)
	return c.Deck.Get(ctx, id)
}

// b's tasks/get, update and cancel of a's task are refused before any
// record is read, as an unknown id is, so they cannot differ in time:
// by a's whole id (leaked), by a's record id with b's own secret and
// tag, or with a's secret and no tag. a's own reads its record.
func TestOthersTaskRefusedBeforeAnyRead(t *testing.T) {
	r, _ := twoAgents(t)
	idA, idB := callAs(t, r, tokenA), callAs(t, r, tokenB)
	recA, secretA, _ := splitID(idA)
	_, secretB, tagB := splitID(idB)
	if tagB == "" {
		t.Fatalf("b was given %s, an id without a tag", idB)
	}
	counted := &countGets{Deck: r.eng}
	opts := r.proxy.opts
	opts.Deck = counted
	p := New(opts)
	t.Cleanup(func() { p.Close() })
	ts := httptest.NewServer(handler(t, p))
	t.Cleanup(ts.Close)
	via := &rig{srv: r.srv, eng: r.eng, url: ts.URL + "/mcp/demo"}

	unknown := model.NewID(time.Now()) + handleSep + secretB + handleSep + tagB
	for _, method := range []string{"tasks/get", "tasks/update", "tasks/cancel"} {
		want := taskReq(t, via, tokenB, method, unknown)
		for _, id := range []string{idA, recA + handleSep + secretB + handleSep + tagB, recA + handleSep + secretA} {
			if got := taskReq(t, via, tokenB, method, id); got != want {
				t.Errorf("b's %s of %s: %s, an unknown id: %s", method, id, got, want)
			}
		}
	}
	if n := counted.n.Load(); n != 0 {
		t.Fatalf("b's 9 requests for a's task and 3 for an unknown one read %d records, want none", n)
	}
	if got := taskReq(t, via, tokenA, "tasks/get", idA); !strings.Contains(got, `"status":"working"`) || counted.n.Load() == 0 {
		t.Fatalf("a's own tasks/get: %s (%d reads)", got, counted.n.Load())
	}
}

// 10,000 guesses of agent b, around its own ids (their record ids give
// the time and the sequence, so b's guesses carry its secrets and a's
// very record ids), find nothing: each is an unknown task.
func TestAgentIDsUnguessable(t *testing.T) {
	r, _ := twoAgents(t)
	const n = 20
	var mine, theirs []string
	for range n {
		mine = append(mine, callAs(t, r, tokenB))
		theirs = append(theirs, callAs(t, r, tokenA))
	}
	var guesses []string
	for _, id := range mine {
		rec, secret, _ := strings.Cut(id, handleSep)
		for d := -240; d <= 240; d++ {
			if d != 0 {
				guesses = append(guesses, neighbour(t, rec, d)+handleSep+secret)
			}
		}
	}
	for i, id := range theirs { // a's record ids, exactly, with b's secrets
		rec, _, _ := strings.Cut(id, handleSep)
		_, secret, _ := strings.Cut(mine[i], handleSep)
		guesses = append(guesses, rec+handleSep+secret, rec)
	}
	for len(guesses) < 10000 {
		rec, _, _ := strings.Cut(theirs[len(guesses)%n], handleSep)
		guesses = append(guesses, rec+handleSep+strings.ToLower(rand.Text()))
	}
	found := 0
	for _, g := range guesses {
		params := `{"taskId":` + quote(g) + `,"_meta":` + metaJSON("b", true) + `}`
		if _, a := rpc(t, r.url, "tasks/get", params, as(tokenB)); a.Error == nil || a.Error.Code != -32602 {
			found++
			t.Errorf("guess %s: %+v", g, a)
		}
	}
	t.Logf("%d guesses, %d found", len(guesses), found)
}

// neighbour is the record id d steps of sequence from id.
func neighbour(t *testing.T, id string, d int) string {
	t.Helper()
	enc := base32.NewEncoding("0123456789abcdefghjkmnpqrstvwxyz").WithPadding(base32.NoPadding)
	b, err := enc.DecodeString(id)
	if err != nil || len(b) != 10 {
		t.Fatalf("record id %q: %v", id, err)
	}
	seq := binary.BigEndian.Uint32(b[6:])
	binary.BigEndian.PutUint32(b[6:], seq+uint32(d))
	return enc.EncodeToString(b)
}

// A viewer reads every task of its servers, by the agent's id or the
// record's, and changes none: its calls, answers and cancels are refused
// with a message that says why, and reach no server. An operator reads
// and cancels an agent's task by the record's id.
func TestViewerAndOperator(t *testing.T) {
	r, _ := twoAgents(t)
	idA := callAs(t, r, tokenA)
	recA, _, _ := strings.Cut(idA, handleSep)
	for _, id := range []string{idA, recA} {
		if got := taskReq(t, r, tokenV, "tasks/get", id); !strings.Contains(got, `"status":"working"`) {
			t.Fatalf("viewer's tasks/get of %s: %s", id, got)
		}
	}
	calls := r.srv.Calls("sleep")
	if _, a := rpc(t, r.url, "tools/call", `{"name":"sleep","arguments":{"seconds":1},"_meta":`+metaJSON("v", true)+`}`, as(tokenV)); a.Error == nil || !strings.Contains(a.Error.Message, "viewer") {
		t.Fatalf("viewer's tools/call: %+v", a)
	}
	for _, m := range []string{"tasks/update", "tasks/cancel"} {
		if got := taskReq(t, r, tokenV, m, idA); !strings.Contains(got, "is a viewer") {
			t.Fatalf("viewer's %s: %s", m, got)
		}
	}
	if r.srv.Calls("sleep") != calls || len(r.srv.Requests("tasks/cancel")) != 0 || len(r.srv.Requests("tasks/update")) != 0 {
		t.Fatal("a viewer's request reached the server")
	}
	if got := taskReq(t, r, tokenO, "tasks/cancel", recA); !strings.Contains(got, `"resultType":"complete"`) {
		t.Fatalf("operator's tasks/cancel by record id: %s", got)
	}
	if len(r.srv.Requests("tasks/cancel")) != 1 {
		t.Fatal("the operator's cancel did not reach the server")
	}
	// Prefixes stay unknown to an operator too: the proxy looks up exactly.
	if got := taskReq(t, r, tokenO, "tasks/get", recA[:10]); !strings.Contains(got, "-32602") {
		t.Fatalf("operator's tasks/get of a prefix: %s", got)
	}
}

// proxy --stdio --agent NAME is that agent's principal: its tasks are its
// own (an HTTP agent of another name cannot see them, nor it theirs), and
// an agent whose entry does not list the server is refused at start.
func TestStdioAgentKeptApart(t *testing.T) {
	r, _ := twoAgents(t)
	idA := callAs(t, r, tokenA)
	opts := r.proxy.opts
	opts.Agent = "b"
	asB := &rig{srv: r.srv, eng: r.eng, proxy: New(opts)}
	t.Cleanup(func() { asB.proxy.Close() })
	s := startRawStdio(t, asB, context.Background())
	s.send(t, `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":`+quote(idA)+`,"_meta":`+metaJSON("b", true)+`}}`)
	if a := s.answer(t); a.Error == nil || a.Error.Code != -32602 {
		t.Fatalf("stdio agent b's tasks/get of a's task: %+v", a)
	}
	s.send(t, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"sleep","arguments":{"seconds":600},"_meta":`+metaJSON("b", true)+`}}`)
	a := s.answer(t)
	idB := str(a.Result["taskId"])
	if idB == "" {
		t.Fatalf("stdio agent b's call: %+v", a)
	}
	if e, err := r.eng.Get(context.Background(), idB); err != nil || e.Task.Owner != "b" {
		t.Fatalf("stdio agent b's record: %+v %v", e.Task, err)
	}
	if got := taskReq(t, r, tokenA, "tasks/get", idB); !strings.Contains(got, "-32602") {
		t.Fatalf("agent a's tasks/get of stdio b's task: %s", got)
	}
	opts.Agent = "c"
	asC := New(opts)
	t.Cleanup(func() { asC.Close() })
	if err := asC.ServeStdio(context.Background(), "demo", strings.NewReader(""), io.Discard); err == nil || !strings.Contains(err.Error(), "may not use server") {
		t.Fatalf("stdio agent c on demo: %v", err)
	}
}

// The requestState of a call that needs input before its task exists
// names a's record with a's secret: b cannot continue a's call with it,
// nor with a's record id alone; a can.
func TestAgentsRequestStateKeptApart(t *testing.T) {
	r, _ := twoAgents(t)
	m := metaJSON("x", true)
	_, a := rpc(t, r.url, "tools/call", `{"name":"confirm_first","arguments":{},"_meta":`+m+`}`, as(tokenA))
	state := str(a.Result["requestState"])
	if str(a.Result["resultType"]) != "input_required" || !strings.Contains(state, handleSep) {
		t.Fatalf("confirm_first: %+v", a)
	}
	recState, _, _ := strings.Cut(state, handleSep)
	answer := `"inputResponses":{"confirm":{"action":"accept","content":{"confirm":true}}}`
	calls := r.srv.Calls("confirm_first")
	for _, st := range []string{state, recState} {
		_, b := rpc(t, r.url, "tools/call", `{"name":"confirm_first","arguments":{},"requestState":`+quote(st)+`,`+answer+`,"_meta":`+m+`}`, as(tokenB))
		if b.Error == nil || !strings.Contains(b.Error.Message, "names no call") {
			t.Fatalf("b continues a's call with %q: %+v", st, b)
		}
	}
	if r.srv.Calls("confirm_first") != calls {
		t.Fatal("b's continuation reached the server")
	}
	_, a = rpc(t, r.url, "tools/call", `{"name":"confirm_first","arguments":{},"requestState":`+quote(state)+`,`+answer+`,"_meta":`+m+`}`, as(tokenA))
	if str(a.Result["resultType"]) != "task" {
		t.Fatalf("a's continuation: %+v", a)
	}
}
