package proxy

import (
	"bytes"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/internal/hostile"
	mcpconfig "github.com/taskdeck/taskdeck/mcpclient/config"
)

// Tokens of the two agents the isolation tests configure.
const (
	tokenA = "agent-a-token-0123456789abcdef"
	tokenB = "agent-b-token-0123456789abcdef"
)

// twoAgents is the demo server behind a proxy with agents a and b (both on
// demo) and c (on "other" only), and a log the test can read.
func twoAgents(t *testing.T) (*rig, *syncBuffer) {
	t.Helper()
	srv := hostile.Start(t, demo.Options{Speed: 0.05, PollInterval: 20e6})
	logs := &syncBuffer{}
	cfg := `{"mcpServers":{"demo":{"url":"` + srv.URL + `"},"other":{"url":"` + srv.URL + `"}},
	"agents":{"a":{"token":"${TOKEN_A}","servers":["demo"]},"b":{"token":"${TOKEN_B}","servers":["demo"]},"c":{"token":"${TOKEN_C}","servers":["other"]}}}`
	lookup := map[string]string{"TOKEN_A": tokenA, "TOKEN_B": tokenB, "TOKEN_C": "agent-c-token-0123456789abcdef"}
	return startRigWith(t, srv, cfg, Options{
		Logger: slog.New(slog.NewTextHandler(logs, nil)),
		Lookup: func(k string) (string, bool) { v, ok := lookup[k]; return v, ok },
	}), logs
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
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
