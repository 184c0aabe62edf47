// Package proxy puts taskdeck between MCP agents and their servers: one
// MCP 2026-07-28 endpoint per configured server, over streamable HTTP
// (/mcp/<name>) or stdio. Every request that is not about a task passes
// through to the server; tools/call and tasks/* go through the Deck, so
// every task an agent starts is durable before the agent hears of it, and
// agents that cannot speak the tasks extension are held until the end.
package proxy

import (
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/mcpclient"
	"github.com/taskdeck/taskdeck/mcpclient/config"
	"golang.org/x/sync/singleflight"
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
	// Token, when set, is the operator's credential: sent as
	// "Authorization: Bearer <Token>", it may use every server and every
	// task. Agents have theirs in the config's "agents"; over HTTP every
	// request needs one or the other, on every address.
	Token string
	// Agent names the agent principal ServeStdio serves (it runs as the
	// local user); its "agents" entry, if any, gives its role and servers.
	// Empty: the local user's name.
	Agent string
	// MaxBody bounds an agent's request body, in bytes.
	MaxBody int64
	// PollWait bounds a tasks/get's wait for a poll it asked for.
	PollWait time.Duration
	// Lookup expands ${VAR} in the config; os.LookupEnv when nil.
	Lookup func(string) (string, bool)
	// HandleKey tags the task ids agents are given (see agentID), so that
	// an id of another agent's task, or none, is refused before any read,
	// in the time of an unknown one. It must stay the same across
	// restarts (HandleKeyFrom derives it from the audit key). It also
	// makes the task ids' secrets (sealedPrefix) and signs the 2025-11-25
	// front's session ids, so that both outlive a restart. Nil: ids
	// untagged, and a refusal reads the record first; secrets random
	// (that front's tasks/list then lists only an agent's keyed or
	// re-attached calls); sessions end with the process.
	HandleKey []byte
}

// HandleKeyFrom derives the proxy's HandleKey from the audit key
// (store.LoadAuditKey), apart from the audit seals; nil for nil.
func HandleKeyFrom(auditKey []byte) []byte {
	return subKey(auditKey, "taskdeck proxy: agents' task ids")
}

// subKey derives a key for one purpose from key; nil for nil.
func subKey(key []byte, purpose string) []byte {
	if key == nil {
		return nil
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(purpose))
	return mac.Sum(nil)
}

// Proxy serves agents. Close it to stop following the Deck's feed.
type Proxy struct {
	opts   Options
	log    *slog.Logger
	hub    *hub
	gate   *gate
	legacy *legacyFront
	// sealKey makes task id secrets from the nonces records keep (see
	// sealedPrefix); nil without a HandleKey.
	sealKey []byte

	mu     sync.Mutex
	ups    map[string]*mcpclient.Upstream // by server name, made on first use
	htools map[string]*headerTools        // by server name, made on first use
	// launching joins the launches of calls that may re-attach, by the
	// handle hash they share.
	launching singleflight.Group
}

// New makes a proxy over opts.Deck.
func New(opts Options) *Proxy {
	opts.Logger = cmp.Or(opts.Logger, slog.New(slog.DiscardHandler))
	opts.HoldLimit = cmp.Or(opts.HoldLimit, DefaultHoldLimit)
	opts.MaxBody = cmp.Or(opts.MaxBody, DefaultMaxBody)
	opts.PollWait = cmp.Or(opts.PollWait, DefaultPollWait)
	if opts.Lookup == nil {
		opts.Lookup = os.LookupEnv
	}
	if opts.Config == nil {
		opts.Config = &config.Config{}
	}
	return &Proxy{opts: opts, log: opts.Logger, hub: newHub(opts.Deck, opts.Logger), gate: newGate(opts.Config), legacy: newLegacyFront(opts.HandleKey),
		sealKey: subKey(opts.HandleKey, "taskdeck proxy: task id secrets"), ups: map[string]*mcpclient.Upstream{}, htools: map[string]*headerTools{}}
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
// not listen on: anything but loopback needs the operator's token.
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

// Handler serves /mcp/<name> for every configured server, and the
// operators' inbox at InboxPath (see inboxHandler). Every request
// passes the gate first: nothing a web page sends reaches a server, and
// only a request with an agent's token (or the operator's) is read. It
// reads the agents' tokens from the environment: an unset or shared one
// is an error, as is having none at all.
func (p *Proxy) Handler() (http.Handler, error) {
	if err := p.gate.load(p.opts.Config, p.opts.Token, p.opts.Lookup); err != nil {
		return nil, err
	}
	if p.gate.empty() {
		return nil, errors.New(`the proxy would admit nobody: add an agent under "agents" in the config (` + "`taskdeck agent add NAME`" + ` prints one), or give the operator's token ($` + "TASKDECK_PROXY_TOKEN" + `)`)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/mcp/{name}", p.serveHTTP)
	mux.Handle(InboxPath, p.inboxHandler())
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeHTTPError(w, http.StatusNotFound, nil, jsonrpc.CodeInvalidRequest,
			fmt.Sprintf("no MCP endpoint at %s; the proxy serves /mcp/<server> for the servers: %s (and operators the inbox at `+InboxPath+`)", r.URL.Path, p.names(principalOf(r.Context()))))
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pr, ok := p.admit(w, r)
		if !ok {
			return
		}
		mux.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, pr)))
	}), nil
}

// names lists the servers pr may use.
func (p *Proxy) names(pr principal) string {
	names := slices.DeleteFunc(p.opts.Config.Names(), func(n string) bool { return !pr.may(n) })
	if len(names) == 0 {
		return "none for this agent"
	}
	return strings.Join(names, ", ")
}

type principalKey struct{}

func principalOf(ctx context.Context) principal {
	pr, _ := ctx.Value(principalKey{}).(principal)
	return pr
}
