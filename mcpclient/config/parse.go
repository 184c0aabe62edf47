// Package config is taskdeck's server configuration: the mcpServers file
// MCP clients share, ${VAR} expansion, and the URL policy (what a server
// URL may be, and how URLs are redacted before they are shown or stored).
package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/taskdeck/taskdeck/internal/nearest"
)

// ServerConfig is one entry of mcpServers. Exactly one of Command or URL is set.
type ServerConfig struct {
	Name    string            `json:"-"`
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	// ForwardAgentCredentials lets the proxy pass an agent's own Cookie
	// headers on to this server; by default only the headers above reach
	// it. An agent's Authorization is its token at the proxy: never passed.
	ForwardAgentCredentials bool `json:"forwardAgentCredentials,omitempty"`
	// Protocol pins the MCP revision spoken to this server (one of
	// Protocols); empty: 2026-07-28 where the server offers it, else
	// 2025-11-25.
	Protocol string `json:"protocol,omitempty"`
	// Reattach lets the proxy answer an agent's call that repeats an open
	// call of the same agent (same tool, same arguments) with that task
	// instead of launching another: "reattach": true for every tool, or a
	// list of tool names. See ServerConfig.Reattaches.
	Reattach Reattach `json:"reattach,omitzero"`
	// Deadlines bound its waits for input: "deadline", "toolDeadlines",
	// "onDeadline" (deadline.go). The engine's alone: not marshalled.
	Deadlines Deadlines `json:"-"`

	path string // the file it came from, for messages; "" for --url
}

// Protocols are the MCP revisions a server's "protocol" may pin, newest first.
var Protocols = []string{"2026-07-28", "2025-11-25"}

// Config is the server configuration, in the JSON shape MCP clients share:
// {"mcpServers": {"NAME": {...}}}. Other top-level keys are ignored.
type Config struct {
	Servers map[string]ServerConfig
	// Store is the top-level "store": a postgres:// connection string
	// for a fleet's shared database; empty: Badger in the data directory.
	Store string
	// Agents are who may use the proxy, by token (top-level "agents").
	Agents map[string]AgentConfig
	// Proxy says which browser origins and Host names the proxy admits.
	Proxy ProxyConfig
	// Retention is the top-level "retention": how long finished tasks are
	// kept before the owner prunes them.
	Retention Retention
	// Notify is the top-level "notify": webhooks and command hooks told
	// of task events (notify.go).
	Notify Notify

	path string // the file it came from, for messages
}

// ConfigError says what is wrong with the configuration, where, and what
// to do. Its text is one line.
type ConfigError struct {
	Path string // the config file; "" for --url and for a config built in code
	// Where points into the file: "line 3, column 7" for a syntax error, a
	// field path such as "mcpServers.build.args" otherwise; may be "".
	Where string
	// Line and Column are set (1-based) for syntax errors.
	Line, Column int
	Msg          string
}

func (e *ConfigError) Error() string {
	var b strings.Builder
	if e.Path != "" {
		b.WriteString("config ")
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	if e.Where != "" {
		b.WriteString(e.Where)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	// One line, whatever a path or a wrapped error holds.
	return strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return ' '
		}
		return r
	}, b.String())
}

// LoadConfig reads the file. A missing file is an empty config. Only a
// regular file is read: opening a FIFO or a device could block forever.
func LoadConfig(path string) (*Config, error) {
	data, err := readRegular(path)
	if errors.Is(err, fs.ErrNotExist) {
		return &Config{Servers: map[string]ServerConfig{}, path: path}, nil
	}
	var odd *notRegularError
	if errors.As(err, &odd) {
		return nil, &ConfigError{Path: path, Msg: fmt.Sprintf("cannot read it: it is %s, not a regular file; pass --config a JSON file", odd.kind)}
	}
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path is already in the message
		}
		return nil, &ConfigError{Path: path, Msg: fmt.Sprintf("cannot read the file (%v); check the path and its permissions, or pass --config another file", err)}
	}
	return ParseConfig(path, data)
}

// readRegular reads a regular file. It opens without blocking (O_NONBLOCK
// matters only for FIFOs and devices) and checks the kind of what it
// opened, so that nothing can be swapped in between a check and the open.
func readRegular(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, &notRegularError{kind: fileKind(fi.Mode())}
	}
	return io.ReadAll(f)
}

type notRegularError struct{ kind string }

func (e *notRegularError) Error() string { return e.kind + ", not a regular file" }

func fileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeDevice != 0, m&fs.ModeCharDevice != 0:
		return "a device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	}
	return "a special file"
}

// otherClientsKeys are the top-level keys under which other MCP clients
// keep their servers (VS Code: "servers", Zed: "context_servers").
var otherClientsKeys = []string{"servers", "context_servers"}

// topKeys are the top-level keys taskdeck reads. Any other key is refused,
// except those other clients keep in a shared file (foreignTopKeys): a
// misspelt key would otherwise be a setting silently not applied.
var (
	topKeys        = []string{"mcpServers", "store", "agents", "proxy", "dashboard", "retention", "notify"}
	foreignTopKeys = append([]string{"$schema", "inputs", "globalShortcut", "preferences"}, otherClientsKeys...)
)

// serverKeys are the keys of an mcpServers entry taskdeck reads, and
// foreignServerKeys those other clients write there, which it ignores.
var (
	serverKeys        = []string{"command", "args", "env", "url", "headers", "forwardAgentCredentials", "protocol", "reattach", "deadline", "toolDeadlines", "onDeadline"}
	foreignServerKeys = []string{"type", "disabled", "cwd", "timeout", "envFile", "description", "alwaysAllow", "autoApprove"}
)

// unknownKey refuses the first key (in sorted order) that is neither read
// nor another client's, naming the keys it is close to.
func unknownKey(fields map[string]json.RawMessage, known, foreign []string) (string, string) {
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if slices.Contains(known, k) || slices.Contains(foreign, k) {
			continue
		}
		if close := nearest.Names(k, known); len(close) > 0 {
			return k, fmt.Sprintf("unknown key %q; did you mean %q?", k, close[0])
		}
		return k, fmt.Sprintf("unknown key %q; the keys here are %s", k, quoteAll(known))
	}
	return "", ""
}

// knownKeys refuses a key of the object raw (at where) that is not in known.
func knownKeys(raw json.RawMessage, where string, known []string, fail func(string, string, ...any) error) error {
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil {
		return nil // not an object: the caller's decode says so
	}
	if k, msg := unknownKey(fields, known, nil); k != "" {
		return fail(where+"."+k, "%s", msg)
	}
	return nil
}

func quoteAll(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	return strings.Join(q, ", ")
}

// ParseConfig parses the contents of a config file; path is used in messages.
func ParseConfig(path string, data []byte) (*Config, error) {
	cfg := &Config{Servers: map[string]ServerConfig{}, path: path}
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf")) // a BOM some editors write
	if len(bytes.TrimSpace(data)) == 0 {
		return cfg, nil
	}
	fail := func(where, format string, args ...any) error {
		return &ConfigError{Path: path, Where: where, Msg: fmt.Sprintf(format, args...)}
	}

	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			line, col := lineCol(data, se.Offset)
			return nil, &ConfigError{Path: path, Where: fmt.Sprintf("line %d, column %d", line, col), Line: line, Column: col,
				Msg: fmt.Sprintf("invalid JSON (%v); fix the syntax there (comments and trailing commas are not allowed)", se)}
		}
		return nil, fail("", "want a JSON object like {\"mcpServers\": {...}}, got %s", jsonKind(data))
	}
	if k, msg := unknownKey(top, topKeys, foreignTopKeys); k != "" {
		return nil, fail(k, "%s", msg)
	}
	if raw, ok := top["store"]; ok && !isJSONNull(raw) {
		if err := json.Unmarshal(raw, &cfg.Store); err != nil {
			return nil, fail("store", "want a string such as \"postgres://user@host/db\", got %s", jsonKind(raw))
		}
	}
	if err := parseRetention(cfg, top["retention"], fail); err != nil {
		return nil, err
	}
	if err := parseNotify(cfg, top["notify"], fail); err != nil {
		return nil, err
	}
	raw, ok := top["mcpServers"]
	if !ok {
		for _, other := range otherClientsKeys {
			// Servers there would silently be none here; an empty set loses nothing.
			var theirs map[string]json.RawMessage
			if json.Unmarshal(top[other], &theirs) == nil && len(theirs) > 0 {
				return nil, fail("", "has %q (another client's key) but no \"mcpServers\"; taskdeck reads its servers from \"mcpServers\": rename the key", other)
			}
		}
	}
	if !ok || isJSONNull(raw) {
		if err := parseAgents(cfg, top); err != nil {
			return nil, err
		}
		return cfg, nil
	}
	var servers map[string]json.RawMessage
	if err := json.Unmarshal(raw, &servers); err != nil {
		return nil, fail("mcpServers", "want an object mapping server names to {\"command\": ...} or {\"url\": ...}, got %s", jsonKind(raw))
	}
	names := make([]string, 0, len(servers))
	for name := range servers {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		s, err := parseServer(path, name, servers[name])
		if err != nil {
			return nil, err
		}
		cfg.Servers[name] = s
	}
	if err := parseAgents(cfg, top); err != nil {
		return nil, err
	}
	return cfg, nil
}

func parseServer(path, name string, raw json.RawMessage) (ServerConfig, error) {
	where := "mcpServers" + fieldKey(name)
	fail := func(field, format string, args ...any) error {
		return &ConfigError{Path: path, Where: where + field, Msg: fmt.Sprintf(format, args...)}
	}
	s := ServerConfig{Name: name, path: path}
	if strings.TrimSpace(name) == "" {
		return s, fail("", "a server name is empty; give it a name, the one you will pass to --server")
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || isJSONNull(raw) {
		return s, fail("", "want an object with \"command\" (a local stdio server) or \"url\" (streamable HTTP), got %s", jsonKind(raw))
	}
	if k, msg := unknownKey(fields, serverKeys, foreignServerKeys); k != "" {
		return s, fail("."+k, "%s", msg)
	}
	decode := func(key string, dst any, want string) error {
		v, ok := fields[key]
		if !ok || isJSONNull(v) {
			return nil
		}
		if err := json.Unmarshal(v, dst); err != nil {
			return fail("."+key, "want %s, got %s", want, jsonKind(v))
		}
		return nil
	}
	var rawArgs []json.RawMessage
	var rawEnv, rawHeaders map[string]json.RawMessage
	for _, d := range []struct {
		key  string
		dst  any
		want string
	}{
		{"command", &s.Command, "a string (the program to run)"},
		{"args", &rawArgs, `a list of strings, e.g. ["--stdio"]`},
		{"env", &rawEnv, `an object of strings, e.g. {"LOG": "debug"}`},
		{"url", &s.URL, "a string (an http:// or https:// URL)"},
		{"headers", &rawHeaders, `an object of strings, e.g. {"Authorization": "Bearer ${TOKEN}"}`},
		{"forwardAgentCredentials", &s.ForwardAgentCredentials, "true or false"},
		{"protocol", &s.Protocol, fmt.Sprintf("a string, one of %s", quoteAll(Protocols))},
		{"reattach", &s.Reattach, `true (every tool) or a list of tool names, e.g. ["deploy"]`},
	} {
		if err := decode(d.key, d.dst, d.want); err != nil {
			return s, err
		}
	}
	var err error
	if s.Deadlines, err = parseDeadlines(fields, fail); err != nil {
		return s, err
	}
	if s.Protocol != "" && !slices.Contains(Protocols, s.Protocol) {
		return s, fail(".protocol", "taskdeck speaks %s, not %q; leave the key out to negotiate", quoteAll(Protocols), s.Protocol)
	}
	for i, a := range rawArgs {
		var v string
		if err := json.Unmarshal(a, &v); err != nil {
			return s, fail(fmt.Sprintf(".args[%d]", i), "want a string, got %s (args is a list of strings: quote it)", jsonKind(a))
		}
		s.Args = append(s.Args, v)
	}
	if s.Env, err = stringMap(rawEnv, func(k string) string { return ".env" + fieldKey(k) }, fail); err != nil {
		return s, err
	}
	if s.Headers, err = stringMap(rawHeaders, func(k string) string { return ".headers" + fieldKey(k) }, fail); err != nil {
		return s, err
	}
	for k := range s.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return s, fail(".env", "variable name %q is not valid; use a name without \"=\"", k)
		}
	}
	if err := s.validate(); err != nil {
		return s, err
	}
	return s, nil
}

// stringMap checks that every value of an object is a string.
func stringMap(raw map[string]json.RawMessage, field func(string) string, fail func(string, string, ...any) error) (map[string]string, error) {
	if raw == nil {
		return nil, nil
	}
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make(map[string]string, len(raw))
	for _, k := range keys {
		var v string
		if err := json.Unmarshal(raw[k], &v); err != nil {
			return nil, fail(field(k), "want a string, got %s (quote it)", jsonKind(raw[k]))
		}
		out[k] = v
	}
	return out, nil
}

// validate checks the shape of an entry. A URL that still holds ${VAR} is
// checked after expansion instead.
func (s ServerConfig) validate() error {
	fail := func(field, msg string) error {
		return &ConfigError{Path: s.path, Where: s.loc(field), Msg: msg}
	}
	switch {
	case s.Command != "" && s.URL != "":
		return fail("", "has both \"command\" and \"url\"; keep one (command for a local stdio server, url for streamable HTTP)")
	case s.Command == "" && s.URL == "":
		return fail("", "needs \"command\" (a local stdio server) or \"url\" (streamable HTTP)")
	case s.URL != "" && !strings.Contains(s.URL, "${"):
		if msg := checkURL(s.URL, true); msg != "" {
			return fail(".url", msg)
		}
	}
	return nil
}

// Reattach is a server's "reattach": every tool (true) or the tools named.
type Reattach struct {
	All   bool
	Tools []string
}

// UnmarshalJSON reads true, false or a list of tool names.
func (r *Reattach) UnmarshalJSON(b []byte) error {
	if err := json.Unmarshal(b, &r.All); err == nil {
		return nil
	}
	r.All = false
	return json.Unmarshal(b, &r.Tools)
}

// MarshalJSON writes what UnmarshalJSON reads.
func (r Reattach) MarshalJSON() ([]byte, error) {
	if r.Tools != nil && !r.All {
		return json.Marshal(r.Tools)
	}
	return json.Marshal(r.All)
}

// Reattaches tells a tool whose repeated open calls re-attach.
func (s ServerConfig) Reattaches(tool string) bool {
	return s.Reattach.All || slices.Contains(s.Reattach.Tools, tool)
}

// loc names the entry, and a field of it, in messages.
func (s ServerConfig) loc(field string) string {
	switch {
	case s.path == "" && s.Name == "":
		return "--url"
	case s.path == "":
		return strings.TrimSpace("server " + quoteName(s.Name) + " " + strings.TrimPrefix(field, "."))
	default:
		return "mcpServers" + fieldKey(s.Name) + field
	}
}

// Names returns the configured server names, sorted.
func (c *Config) Names() []string {
	if c == nil {
		return nil
	}
	names := make([]string, 0, len(c.Servers))
	for n := range c.Servers {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Server returns a copy of the named entry.
func (c *Config) Server(name string) (ServerConfig, error) {
	if c != nil {
		if s, ok := c.Servers[name]; ok {
			s = s.clone()
			s.Name = name
			if s.path == "" {
				s.path = c.path
			}
			return s, nil
		}
	}
	var path string
	if c != nil {
		path = c.path
	}
	names := c.Names()
	where := "the configuration"
	if path != "" {
		where = path
	}
	var msg string
	if len(names) == 0 {
		msg = fmt.Sprintf("no server named %s: no servers are configured; add one under \"mcpServers\" in %s, or pass --url", quoteName(name), where)
	} else {
		quoted := make([]string, len(names))
		for i, n := range names {
			quoted[i] = quoteName(n)
		}
		msg = fmt.Sprintf("no server named %s (configured: %s); add it under \"mcpServers\" in %s, or pass --url",
			quoteName(name), strings.Join(quoted, ", "), where)
	}
	return ServerConfig{}, &ConfigError{Msg: msg}
}

func (s ServerConfig) clone() ServerConfig {
	c := s
	c.Args = slices.Clone(s.Args)
	c.Env = cloneStrings(s.Env)
	c.Headers = cloneStrings(s.Headers)
	c.Reattach.Tools = slices.Clone(s.Reattach.Tools)
	c.Deadlines.Tools = maps.Clone(s.Deadlines.Tools)
	return c
}

func (s ServerConfig) displayName() string {
	if s.Name != "" {
		return s.Name
	}
	return "--url"
}

func cloneStrings(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	c := make(map[string]string, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// fieldKey renders a key in a field path: .name, or ["odd name"].
func fieldKey(k string) string {
	if k != "" && plainKey.MatchString(k) {
		return "." + k
	}
	return "[" + quoteName(k) + "]"
}

var plainKey = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// quoteName quotes a name for a message, escaping anything that could
// break the line or the terminal.
func quoteName(s string) string { return fmt.Sprintf("%q", s) }

func lineCol(data []byte, offset int64) (line, col int) {
	p := int(offset) - 1 // the offset counts the offending byte
	p = max(0, min(p, len(data)))
	before := data[:p]
	line = 1 + bytes.Count(before, []byte("\n"))
	start := bytes.LastIndexByte(before, '\n') + 1
	col = utf8.RuneCount(before[start:]) + 1
	return line, col
}

func isJSONNull(raw json.RawMessage) bool {
	return string(bytes.TrimSpace(raw)) == "null"
}

// jsonKind names the JSON type of a value for messages (never the value:
// it may be a secret).
func jsonKind(raw []byte) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '{':
		return "an object"
	case '[':
		return "a list"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	default:
		return "a number"
	}
}

// Refuse is a ConfigError about this server: msg says what is wrong with it
// for the use at hand.
func (s ServerConfig) Refuse(msg string) *ConfigError {
	return &ConfigError{Path: s.path, Where: s.loc(""), Msg: msg}
}

// Retention is the config's "retention": {"finished": "720h"} prunes
// finished tasks (completed, failed, cancelled, unknown) not changed for 720 hours.
// Zero: nothing is pruned but by `taskdeck prune`.
type Retention struct {
	Finished time.Duration
}

// MinRetention bounds "retention.finished" from below: a shorter one
// would prune what an operator is still reading.
const MinRetention = time.Minute

func parseRetention(cfg *Config, raw json.RawMessage, fail func(string, string, ...any) error) error {
	if raw == nil || isJSONNull(raw) {
		return nil
	}
	var r struct {
		Finished json.RawMessage `json:"finished"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return fail("retention", `want {"finished": "720h"}, got %s`, jsonKind(raw))
	}
	if err := knownKeys(raw, "retention", []string{"finished"}, fail); err != nil {
		return err
	}
	if r.Finished == nil {
		return fail("retention", `want {"finished": "720h"}: how long finished tasks are kept`)
	}
	var text string
	if err := json.Unmarshal(r.Finished, &text); err != nil {
		return fail("retention.finished", `want a duration such as "720h" (quote it), got %s`, jsonKind(r.Finished))
	}
	d, err := ParseAge(text)
	if err != nil || d < MinRetention {
		return fail("retention.finished", "want an age of at least %s such as \"30d\", \"720h\" or \"1d12h\", got %q", MinRetention, text)
	}
	cfg.Retention.Finished = d
	return nil
}

// maxDays keeps a count of days far from overflowing a time.Duration.
const maxDays = 100_000

var leadingDays = regexp.MustCompile(`^([0-9]+)d`)

// ParseAge reads a non-negative age: a Go duration ("12h", "90m"),
// optionally led by whole days ("3d", "1d12h").
func ParseAge(s string) (time.Duration, error) {
	bad := fmt.Errorf("%q is not an age; write it like 3d, 12h, 90m or 1d12h", s)
	var days time.Duration
	if m := leadingDays.FindStringSubmatch(s); m != nil {
		n, err := strconv.Atoi(m[1])
		if err != nil || n > maxDays {
			return 0, bad
		}
		days, s = time.Duration(n)*24*time.Hour, s[len(m[0]):]
		if s == "" {
			return days, nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, bad
	}
	return days + d, nil
}
