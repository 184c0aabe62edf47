package proxy

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/internal/waitfor"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/engine"
	"github.com/taskdeck/taskdeck/internal/hostile"
	mcpconfig "github.com/taskdeck/taskdeck/mcpclient/config"
	"github.com/taskdeck/taskdeck/model"
)

// rig is a demo server on loopback, the real engine on a temporary store,
// and the proxy in front, on loopback too.
type rig struct {
	srv   *hostile.Server
	eng   *engine.Engine
	proxy *Proxy
	url   string // the proxy's endpoint for the demo server
	base  string // the proxy's root
}

var fastPolicy = model.PollPolicy{Default: 20 * time.Millisecond, Floor: 5 * time.Millisecond, Cap: 200 * time.Millisecond, Growth: 1.5}

func startRig(t testing.TB, dopts demo.Options, popts Options) *rig {
	t.Helper()
	if dopts.Speed == 0 {
		dopts.Speed = 0.05
	}
	if dopts.PollInterval == 0 {
		dopts.PollInterval = 20 * time.Millisecond
	}
	srv := hostile.Start(t, dopts)
	return startRigWith(t, srv, fmt.Sprintf(`{"mcpServers":{"demo":{"url":%q}}}`, srv.URL), popts)
}

// startRigWith puts the engine and the proxy in front of srv, with config;
// tune, if given, changes the engine's options.
func startRigWith(t testing.TB, srv *hostile.Server, config string, popts Options, tune ...func(*engine.Options)) *rig {
	t.Helper()
	r := startFront(t, config, popts, tune...)
	r.srv = srv
	return r
}

// startFront is the engine and the proxy for the servers of config.
func startFront(t testing.TB, config string, popts Options, tune ...func(*engine.Options)) *rig {
	t.Helper()
	cfg, err := mcpconfig.ParseConfig("test.json", []byte(config))
	if err != nil {
		t.Fatal(err)
	}
	withTestAgent(cfg, &popts)
	eopts := engine.Options{DataDir: t.TempDir(), Config: cfg, Policy: fastPolicy, RequestTimeout: 5 * time.Second}
	for _, f := range tune {
		f(&eopts)
	}
	eng, err := engine.Open(eopts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	// The engine watches its tasks (polls, push) as under `taskdeck serve`.
	if err := eng.PollNow(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	popts.Deck, popts.Config = eng, cfg
	popts.HandleKey = HandleKeyFrom(eng.AuditKey()) // as serve does
	p := New(popts)
	t.Cleanup(func() { p.Close() })
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts := &httptest.Server{Listener: l, Config: &http.Server{Handler: handler(t, p)}}
	ts.Start()
	t.Cleanup(ts.Close)
	return &rig{eng: eng, proxy: p, url: ts.URL + "/mcp/demo", base: ts.URL}
}

// goClient connects go-sdk's client (which has no tasks) to an endpoint.
func goClient(t testing.TB, url, name string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: name, Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1, HTTPClient: &http.Client{Transport: bearer(testToken)}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// until waits for cond, failing the test after a deadline.
func until(t testing.TB, what string, cond func() bool) {
	t.Helper()
	waitfor.Within(t, 10*time.Second, what, cond)
}

// only returns the one record in the deck, waiting for it to appear.
func only(t testing.TB, d deck.Deck) *model.Task {
	t.Helper()
	var list []deck.Entry
	until(t, "one record", func() bool {
		var err error
		list, err = d.List(context.Background(), deck.Filter{})
		return err == nil && len(list) == 1
	})
	return list[0].Task
}

// text is a tool result's first text.
func text(t testing.TB, res *mcp.CallToolResult) string {
	t.Helper()
	if len(res.Content) == 0 {
		t.Fatalf("result has no content: %+v", res)
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("result content is %T", res.Content[0])
	}
	return tc.Text
}

func mustList(t testing.TB, r *rig) []deck.Entry {
	t.Helper()
	list, err := r.eng.List(context.Background(), deck.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	return list
}

// testToken is the token of the agent "test" that startFront configures
// (when the config names no agents) for every server.
const testToken = "test-agent-token-0123456789abcdef"

// withTestAgent adds the agent "test" to a config without agents, its
// token in a ${VAR} the proxy's lookup knows (other variables: the
// environment's).
func withTestAgent(cfg *mcpconfig.Config, popts *Options) {
	if len(cfg.Agents) == 0 {
		cfg.Agents = map[string]mcpconfig.AgentConfig{"test": {Name: "test", Token: "${TASKDECK_TEST_TOKEN}", Role: model.RoleAgent, Servers: cfg.Names()}}
	}
	lookup := popts.Lookup
	if lookup == nil {
		lookup = os.LookupEnv
	}
	popts.Lookup = func(k string) (string, bool) {
		if k == "TASKDECK_TEST_TOKEN" {
			return testToken, true
		}
		return lookup(k)
	}
}

// handler is the proxy's HTTP handler, failing the test if it has none.
func handler(t testing.TB, p *Proxy) http.Handler {
	t.Helper()
	h, err := p.Handler()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// bearer is a transport that sends a token, as an agent configured with
// the proxy's "headers" does.
type bearer string

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}
