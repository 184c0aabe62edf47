// Package proxy puts taskdeck between MCP agents and their servers: one
// MCP 2026-07-28 endpoint per configured server, over streamable HTTP
// (/mcp/<name>) or stdio. Every request that is not about a task passes
// through to the server; tools/call and tasks/* go through the Deck, so
// every task an agent starts is durable before the agent hears of it, and
// agents that cannot speak the tasks extension are held until the end.
package proxy

import (
	"cmp"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/mcpclient"
	"github.com/taskdeck/taskdeck/mcpclient/config"
)

// Defaults of Options.
const (
	DefaultHoldLimit = 30 * time.Minute
	DefaultMaxBody   = 4 << 20
	// DefaultPollWait bounds how long a tasks/get waits for the engine's
	// poll before it answers from the record.
	DefaultPollWait = 10 * time.Second
)

// Options configure a Proxy. Zero values select the defaults.
type Options struct {
	Deck   deck.Deck
	Config *config.Config // the servers the proxy serves, by name
	Logger *slog.Logger   // nil: discard
	// HoldLimit bounds how long a held call (an agent without the tasks
	// extension) is kept open; then the agent gets a tool error naming the
	// record, which goes on.
	HoldLimit time.Duration
	// Token, when set, must come with every HTTP request as
	// "Authorization: Bearer <Token>". It is required off loopback.
	Token string
	// MaxBody bounds an agent's request body, in bytes.
	MaxBody int64
	// PollWait bounds a tasks/get's wait for a poll it asked for.
	PollWait time.Duration
	// Lookup expands ${VAR} in the config; os.LookupEnv when nil.
	Lookup func(string) (string, bool)
}

// Proxy serves agents. Close it to stop following the Deck's feed.
type Proxy struct {
	opts Options
	log  *slog.Logger
	hub  *hub
	gate *gate

	mu     sync.Mutex
	ups    map[string]*mcpclient.Upstream // by server name, made on first use
	htools map[string]*headerTools        // by server name, made on first use
}

// New makes a proxy over opts.Deck.
func New(opts Options) *Proxy {
	opts.Logger = cmp.Or(opts.Logger, slog.New(slog.DiscardHandler))
	opts.HoldLimit = cmp.Or(opts.HoldLimit, DefaultHoldLimit)
	opts.MaxBody = cmp.Or(opts.MaxBody, DefaultMaxBody)
	opts.PollWait = cmp.Or(opts.PollWait, DefaultPollWait)
	if opts.Config == nil {
		opts.Config = &config.Config{}
	}
	return &Proxy{opts: opts, log: opts.Logger, hub: newHub(opts.Deck, opts.Logger), gate: newGate(opts.Config),
		ups: map[string]*mcpclient.Upstream{}, htools: map[string]*headerTools{}}
}

// Close stops the proxy's watch of the feed; calls still held end with it.
func (p *Proxy) Close() error {
	p.hub.close()
	return nil
}

// server resolves an endpoint's name to its configuration.
func (p *Proxy) server(name string) (config.ServerConfig, bool) {
	if name == "" {
		return config.ServerConfig{}, false
	}
	s, err := p.opts.Config.Server(name)
	return s, err == nil
}

// upstream is the raw HTTP route to a configured server, for passthrough.
func (p *Proxy) upstream(cfg config.ServerConfig) (*mcpclient.Upstream, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if u, ok := p.ups[cfg.Name]; ok {
		return u, nil
	}
	u, err := mcpclient.NewUpstream(cfg, p.opts.Lookup)
	if err != nil {
		return nil, err
	}
	p.ups[cfg.Name] = u
	return u, nil
}

// headerTools is the cache of a server's x-mcp-header arguments.
func (p *Proxy) headerTools(server string) *headerTools {
	p.mu.Lock()
	defer p.mu.Unlock()
	ht := p.htools[server]
	if ht == nil {
		ht = &headerTools{}
		p.htools[server] = ht
	}
	return ht
}

// CheckListen refuses, with a one-line error, an address the proxy must
// not listen on: anything but loopback needs a token.
func CheckListen(addr, token string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("proxy address %q is not HOST:PORT (e.g. 127.0.0.1:8810)", addr)
	}
	if token != "" || isLoopback(host) {
		return nil
	}
	where := host
	if where == "" {
		where = "every interface"
	}
	return fmt.Errorf("proxy address %s listens on %s, beyond this machine: give a token for agents to send, or listen on 127.0.0.1", addr, where)
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Listen checks addr with CheckListen, then listens on it.
func Listen(addr, token string) (net.Listener, error) {
	if err := CheckListen(addr, token); err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("proxy cannot listen on %s: %w", addr, err)
	}
	return l, nil
}

// Handler serves /mcp/<name> for every configured server. Every request
// passes the gate first: nothing a web page sends reaches a server.
func (p *Proxy) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/mcp/{name}", p.serveHTTP)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeHTTPError(w, http.StatusNotFound, nil, codeInvalidRequest,
			fmt.Sprintf("no MCP endpoint at %s; the proxy serves /mcp/<server> for the servers: %s", r.URL.Path, p.names()))
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if why := p.gate.browser(r); why != "" {
			p.log.Warn("proxy: refused a request a web page may have sent", "why", why, "origin", r.Header.Get("Origin"), "host", r.Host, "remote", r.RemoteAddr)
			writeHTTPError(w, http.StatusForbidden, nil, codeInvalidRequest, "taskdeck proxy: refused: "+why+" (a web page cannot use the proxy)")
			return
		}
		mux.ServeHTTP(w, r)
	})
}

func (p *Proxy) names() string {
	names := p.opts.Config.Names()
	if len(names) == 0 {
		return "none configured"
	}
	return strings.Join(names, ", ")
}

// authorized checks the proxy's token, if it has one.
func (p *Proxy) authorized(r *http.Request) bool {
	if p.opts.Token == "" {
		return true
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && subtle.ConstantTimeCompare([]byte(got), []byte(p.opts.Token)) == 1
}
