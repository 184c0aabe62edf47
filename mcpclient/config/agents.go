package config

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
)

// Roles an agent entry may have (model.Role*; this package sees no model).
var agentRoles = []string{"agent", "operator", "viewer"}

// AgentConfig is one entry of "agents": a principal that reaches the proxy
// with a bearer token. The token is always a ${VAR} reference: the file
// never holds the secret, and Expand reads it from the environment.
type AgentConfig struct {
	Name  string `json:"-"`
	Token string `json:"token"` // "${VAR}"
	// Servers are the configured servers it may use; empty: none.
	Servers []string `json:"servers,omitempty"`
	// Role is agent (the default), operator (every task of its servers)
	// or viewer (reads, changes nothing).
	Role string `json:"role,omitempty"`
}

// ProxyConfig is the top-level "proxy": who besides the listen address may
// reach it from a browser's point of view.
type ProxyConfig struct {
	// Origins are the Origin headers let through (scheme://host[:port]);
	// a request with any other Origin is refused.
	Origins []string `json:"origins,omitempty"`
	// Hosts are Host header names let through besides the listen address
	// (127.0.0.1, localhost, [::1] with its port): name or name:port.
	Hosts []string `json:"hosts,omitempty"`
}

// parseAgents reads the top-level "agents" and "proxy" keys into cfg.
func parseAgents(cfg *Config, top map[string]json.RawMessage) error {
	fail := func(where, format string, args ...any) error {
		return &ConfigError{Path: cfg.path, Where: where, Msg: fmt.Sprintf(format, args...)}
	}
	if raw, ok := top["proxy"]; ok && !isJSONNull(raw) {
		if err := json.Unmarshal(raw, &cfg.Proxy); err != nil {
			return fail("proxy", `want {"origins": ["https://host"], "hosts": ["name"]}, got %s`, jsonKind(raw))
		}
		if err := knownKeys(raw, "proxy", []string{"origins", "hosts"}, fail); err != nil {
			return err
		}
		for i, o := range cfg.Proxy.Origins {
			u, err := url.Parse(o)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" || u.RawQuery != "" {
				return fail(fmt.Sprintf("proxy.origins[%d]", i), "want an origin such as \"https://app.example\" (scheme://host[:port], no path), got %q", o)
			}
		}
		for i, h := range cfg.Proxy.Hosts {
			if h == "" || strings.ContainsAny(h, "/ @") {
				return fail(fmt.Sprintf("proxy.hosts[%d]", i), "want a host name such as \"taskdeck.internal\" or \"taskdeck.internal:8810\", got %q", h)
			}
		}
	}
	raw, ok := top["agents"]
	if !ok || isJSONNull(raw) {
		return nil
	}
	var entries map[string]json.RawMessage
	if err := json.Unmarshal(raw, &entries); err != nil {
		return fail("agents", `want an object mapping agent names to {"token": "${VAR}", "servers": [...]}, got %s`, jsonKind(raw))
	}
	names := make([]string, 0, len(entries))
	for n := range entries {
		names = append(names, n)
	}
	slices.Sort(names)
	cfg.Agents = map[string]AgentConfig{}
	byToken := map[string]string{}
	for _, name := range names {
		where := "agents" + fieldKey(name)
		if strings.TrimSpace(name) == "" || !plainKey.MatchString(name) {
			return fail(where, "an agent name must be letters, digits, - and _ (it names the agent on every record it makes)")
		}
		var a AgentConfig
		if err := json.Unmarshal(entries[name], &a); err != nil || isJSONNull(entries[name]) {
			return fail(where, `want {"token": "${VAR}", "servers": ["NAME"]}, got %s`, jsonKind(entries[name]))
		}
		if err := knownKeys(entries[name], where, []string{"token", "servers", "role"}, fail); err != nil {
			return err
		}
		a.Name = name
		m := varRef.FindStringSubmatch(a.Token)
		if m == nil || m[0] != a.Token || !varName.MatchString(m[1]) {
			// Never quote it: it may be the secret itself.
			return fail(where+".token", "want a ${VAR} reference such as \"${%s_TOKEN}\": a token written in the file is readable by whoever reads the file; export it instead (`taskdeck agent add %s` makes one)", EnvName(name), name)
		}
		if other, dup := byToken[a.Token]; dup {
			return fail(where+".token", "is the same variable as agent %q's; every agent needs its own token", other)
		}
		byToken[a.Token] = name
		if a.Role == "" {
			a.Role = "agent"
		}
		if !slices.Contains(agentRoles, a.Role) {
			return fail(where+".role", "unknown role %q; use one of %s", a.Role, strings.Join(agentRoles, ", "))
		}
		for i, s := range a.Servers {
			if _, ok := cfg.Servers[s]; !ok {
				return fail(fmt.Sprintf("%s.servers[%d]", where, i), "no server %s under \"mcpServers\"; name a configured server", quoteName(s))
			}
		}
		cfg.Agents[name] = a
	}
	return nil
}

// EnvName is the environment variable `taskdeck agent add` suggests for
// an agent's token: CI_BOT_TOKEN.
func EnvName(agent string) string {
	return strings.ToUpper(strings.ReplaceAll(agent, "-", "_")) + "_TOKEN"
}

// ValidAgentName tells a name an "agents" entry may have.
func ValidAgentName(name string) bool { return name != "" && plainKey.MatchString(name) }

// MinTokenLen bounds how short an agent's token may be once expanded.
const MinTokenLen = 24

// ExpandToken reads the agent's token from lookup. An unset, empty or
// short variable is an error naming the variable, never the value.
func (a AgentConfig) ExpandToken(path string, lookup func(string) (string, bool)) (string, error) {
	name := a.Token[2 : len(a.Token)-1]
	where := "agents" + fieldKey(a.Name) + ".token"
	v, ok := lookup(name)
	switch {
	case !ok || v == "":
		return "", &ConfigError{Path: path, Where: where, Msg: fmt.Sprintf("environment variable %s is not set (agent %s); export it before starting the proxy", name, quoteName(a.Name))}
	case len(v) < MinTokenLen:
		return "", &ConfigError{Path: path, Where: where, Msg: fmt.Sprintf("the token in %s is shorter than %d characters; `taskdeck agent add %s` makes a random one", name, MinTokenLen, a.Name)}
	}
	return v, nil
}

// Path is the file the config came from ("" when built in code).
func (c *Config) Path() string {
	if c == nil {
		return ""
	}
	return c.path
}
