package proxy

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/user"
	"slices"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/mcpclient/config"
	"github.com/taskdeck/taskdeck/model"
)

// principal is who sends a request, as its credential names it: the
// servers it may use (all: every configured one) and its role.
type principal struct {
	who     model.Actor
	servers []string
	all     bool
}

func (pr principal) may(server string) bool { return pr.all || slices.Contains(pr.servers, server) }

// seesAll tells a principal that may read every task of its servers (an
// operator, a viewer); an agent sees only its own.
func (pr principal) seesAll() bool {
	return pr.who.Role == model.RoleOperator || pr.who.Role == model.RoleViewer
}

// OperatorName names the principal of Options.Token.
const OperatorName = "operator"

// credential is a principal and the sha256 of its token: the token itself
// is not kept.
type credential struct {
	sum [sha256.Size]byte
	principal
}

// gate is what every HTTP request passes before it is read: the browser
// checks (Origin, Host) and the bearer token.
type gate struct {
	creds   []credential
	origins []string // lower case
	hosts   []string // lower case
}

// newGate is the browser checks of cfg.
func newGate(cfg *config.Config) *gate {
	g := &gate{}
	for _, o := range cfg.Proxy.Origins {
		g.origins = append(g.origins, strings.ToLower(o))
	}
	for _, h := range cfg.Proxy.Hosts {
		g.hosts = append(g.hosts, strings.ToLower(h))
	}
	return g
}

// load reads the agents' tokens (the config's ${VAR}s, from lookup) and
// the operator's. The same token twice is refused: it would name two
// principals at once. Loading again replaces what an earlier load read.
func (g *gate) load(cfg *config.Config, operator string, lookup func(string) (string, bool)) error {
	var creds []credential
	names := make([]string, 0, len(cfg.Agents))
	for n := range cfg.Agents {
		names = append(names, n)
	}
	slices.Sort(names)
	add := func(token string, pr principal) error {
		sum := sha256.Sum256([]byte(token))
		for _, c := range creds {
			if c.sum == sum {
				return fmt.Errorf("agents %q and %q have the same token; give every agent its own (`taskdeck agent add NAME` makes one)", c.who.Name, pr.who.Name)
			}
		}
		creds = append(creds, credential{sum: sum, principal: pr})
		return nil
	}
	for _, n := range names {
		a := cfg.Agents[n]
		tok, err := a.ExpandToken(cfg.Path(), lookup)
		if err != nil {
			return err
		}
		if err := add(tok, principal{who: model.Actor{Name: n, Role: a.Role}, servers: a.Servers}); err != nil {
			return err
		}
	}
	if operator != "" {
		if _, clash := cfg.Agents[OperatorName]; clash {
			return fmt.Errorf("an agent is named %q, the name of the proxy's --token; rename the agent", OperatorName)
		}
		if err := add(operator, principal{who: model.Actor{Name: OperatorName, Role: model.RoleOperator}, all: true}); err != nil {
			return err
		}
	}
	g.creds = creds
	return nil
}

// empty tells a gate that admits nobody: no agent and no token.
func (g *gate) empty() bool { return len(g.creds) == 0 }

// authenticate finds the principal of a request's bearer token. Every
// credential is compared, in constant time, whether or not one matched.
func (g *gate) authenticate(r *http.Request) (principal, bool) {
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || token == "" {
		return principal{}, false
	}
	sum := sha256.Sum256([]byte(token))
	found := -1
	for i := range g.creds {
		if subtle.ConstantTimeCompare(sum[:], g.creds[i].sum[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return principal{}, false
	}
	return g.creds[found].principal, true
}

// browser says why a request is one a web page made, or "": an Origin
// that is not on the list (a cross-site request), or a Host that is not
// the proxy's own address or a configured name (DNS rebinding).
func (g *gate) browser(r *http.Request) string {
	if origins := r.Header.Values("Origin"); len(origins) > 0 {
		if len(origins) > 1 || !slices.Contains(g.origins, strings.ToLower(origins[0])) {
			return "its Origin is not in the config's proxy.origins"
		}
	}
	if !g.ownHost(r) {
		return "its Host is not the proxy's address nor in the config's proxy.hosts"
	}
	return ""
}

// ownHost tells a Host header that names the proxy: the loopback names of
// the port it listens on, the address the request came in on, or a
// configured name (with or without its port).
func (g *gate) ownHost(r *http.Request) bool {
	host := strings.ToLower(r.Host)
	if slices.Contains(g.hosts, host) {
		return true
	}
	name, port, err := net.SplitHostPort(host)
	if err != nil {
		name, port = host, "80"
	}
	if slices.Contains(g.hosts, name) {
		return true
	}
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok {
		return false
	}
	lhost, lport, err := net.SplitHostPort(local.String())
	if err != nil || port != lport {
		return false
	}
	name = strings.TrimSuffix(strings.TrimPrefix(name, "["), "]")
	switch name {
	case "localhost", "127.0.0.1", "::1", lhost:
		return true
	}
	return false
}

// admit runs the gate on one HTTP request: a browser's request is 403, a
// request without a known token 401, each with one log line that names
// neither the token nor whether a server or task exists. It returns the
// request's principal.
func (p *Proxy) admit(w http.ResponseWriter, r *http.Request) (principal, bool) {
	if why := p.gate.browser(r); why != "" {
		p.log.Warn("proxy: refused a request a web page may have sent", "why", why, "origin", r.Header.Get("Origin"), "host", r.Host, "remote", r.RemoteAddr)
		writeHTTPError(w, http.StatusForbidden, nil, jsonrpc.CodeInvalidRequest, "taskdeck proxy: refused: "+why+" (a web page cannot use the proxy)")
		return principal{}, false
	}
	pr, ok := p.gate.authenticate(r)
	if !ok {
		p.log.Warn("proxy: refused a request without a known token", "remote", r.RemoteAddr)
		w.Header().Set("WWW-Authenticate", `Bearer realm="taskdeck"`)
		writeHTTPError(w, http.StatusUnauthorized, nil, jsonrpc.CodeInvalidRequest, "the proxy needs an agent's token: send Authorization: Bearer <token>")
		return principal{}, false
	}
	return pr, true
}

// stdioPrincipal is the agent a stdio proxy serves: its "agents" entry
// when it has one (role and servers), else an agent of that name that may
// use every server (it runs as the local user, who may anyway).
func (p *Proxy) stdioPrincipal() principal {
	name := p.opts.Agent
	if name == "" {
		name = localUser()
	}
	if a, ok := p.opts.Config.Agents[name]; ok {
		return principal{who: model.Actor{Name: name, Role: a.Role}, servers: a.Servers}
	}
	return principal{who: model.Actor{Name: name, Role: model.RoleAgent}, all: true}
}

func localUser() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return "uid-" + strconv.Itoa(os.Getuid())
}

// acting names the principal on ctx for the Deck, with the agent's
// self-reported clientInfo name beside it as a label.
func acting(ctx context.Context, pr principal, label string) context.Context {
	who := pr.who
	who.Label = label
	return deck.WithActor(ctx, who)
}
