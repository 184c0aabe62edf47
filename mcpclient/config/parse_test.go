package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

const configPath = "/home/op/.config/taskdeck/config.json"

func parseOK(t *testing.T, src string) *Config {
	t.Helper()
	cfg, err := ParseConfig(configPath, []byte(src))
	if err != nil {
		t.Fatalf("ParseConfig: %v", err)
	}
	return cfg
}

// parseErr parses src, expects a one-line *ConfigError and returns its text.
func parseErr(t *testing.T, src string) (*ConfigError, string) {
	t.Helper()
	cfg, err := ParseConfig(configPath, []byte(src))
	if err == nil {
		t.Fatalf("ParseConfig accepted %s: %+v", src, cfg)
	}
	if cfg != nil {
		t.Errorf("config returned alongside an error")
	}
	return checkConfigError(t, err, configPath)
}

func checkConfigError(t *testing.T, err error, path string) (*ConfigError, string) {
	t.Helper()
	var ce *ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("error %v is %T, want *ConfigError", err, err)
	}
	msg := err.Error()
	if strings.ContainsAny(msg, "\r\n") {
		t.Fatalf("error is not one line: %q", msg)
	}
	if ce.Path != path {
		t.Errorf("Path = %q, want %q", ce.Path, path)
	}
	if path != "" && !strings.Contains(msg, path) {
		t.Errorf("message does not name the file: %q", msg)
	}
	return ce, msg
}

func wantIn(t *testing.T, msg string, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(msg, p) {
			t.Errorf("message %q lacks %q", msg, p)
		}
	}
}

func TestConfigParseValid(t *testing.T) {
	cfg := parseOK(t, `{
  "mcpServers": {
    "build": {"command": "build-mcp", "args": ["--stdio", "-v"], "env": {"LOG": "debug", "TOKEN": "${BUILD_TOKEN}"}},
    "remote": {"url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}},
    "local": {"url": "http://127.0.0.1:8080/mcp", "type": "http"},
    "min": {"command": "x", "args": null, "env": null, "disabled": false, "cwd": "/tmp"}
  },
  "globalShortcut": "Ctrl+Space",
  "inputs": [{"id": "token"}]
}`)
	if got, want := cfg.Names(), []string{"build", "local", "min", "remote"}; !slices.Equal(got, want) {
		t.Fatalf("Names = %v, want %v", got, want)
	}
	want := ServerConfig{Name: "build", Command: "build-mcp", Args: []string{"--stdio", "-v"},
		Env: map[string]string{"LOG": "debug", "TOKEN": "${BUILD_TOKEN}"}, path: configPath}
	if got, err := cfg.Server("build"); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("Server(build) = %+v, %v; want %+v", got, err, want)
	}
	remote, err := cfg.Server("remote")
	if err != nil || remote.URL != "https://mcp.example.com/mcp" || remote.Headers["Authorization"] != "Bearer ${TOKEN}" || remote.Command != "" {
		t.Fatalf("Server(remote) = %+v, %v", remote, err)
	}
	if min, _ := cfg.Server("min"); min.Args != nil || min.Env != nil || min.Command != "x" {
		t.Fatalf("Server(min) = %+v", min)
	}
}

// "reattach" names every tool (true) or the tools listed; none without it.
func TestConfigReattach(t *testing.T) {
	cfg := parseOK(t, `{"mcpServers": {
  "all": {"url": "https://x.example/mcp", "reattach": true},
  "some": {"url": "https://x.example/mcp", "reattach": ["deploy"]},
  "none": {"url": "https://x.example/mcp"}}}`)
	for _, c := range []struct {
		server, tool string
		want         bool
	}{{"all", "deploy", true}, {"all", "echo", true}, {"some", "deploy", true}, {"some", "echo", false}, {"none", "deploy", false}} {
		s, err := cfg.Server(c.server)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.Reattaches(c.tool); got != c.want {
			t.Errorf("server %s reattaches %s: %v, want %v", c.server, c.tool, got, c.want)
		}
	}
}

// A misspelt key is refused, naming it and the key it is close to: ignored,
// it would be a setting (a token in "header") silently never applied.
func TestConfigUnknownKeys(t *testing.T) {
	for _, c := range []struct {
		src   string
		parts []string
	}{
		{`{"mcpServers": {"b": {"url": "https://x.example/mcp", "header": {"A": "b"}}}}`,
			[]string{`mcpServers.b.header`, `unknown key "header"`, `did you mean "headers"?`}},
		{`{"mcpServers": {}, "stroe": "postgres://x"}`, []string{`stroe: unknown key "stroe"`, `did you mean "store"?`}},
		{`{"mcpServers": {}, "dashbaord": {}}`, []string{`unknown key "dashbaord"`, `did you mean "dashboard"?`}},
		{`{"mcpServers": {}, "colours": {}}`, []string{`unknown key "colours"`, `the keys here are "mcpServers", "store"`}},
		{`{"mcpservers": {}}`, []string{`did you mean "mcpServers"?`}},
	} {
		_, msg := parseErr(t, c.src)
		wantIn(t, msg, c.parts...)
	}
}

func TestConfigParseEmptyShapes(t *testing.T) {
	for name, src := range map[string]string{
		"empty file":       ``,
		"whitespace":       " \n\t\n",
		"empty object":     `{}`,
		"no mcpServers":    `{"servers": {}, "inputs": []}`,
		"null mcpServers":  `{"mcpServers": null}`,
		"empty mcpServers": `{"mcpServers": {}}`,
		"byte order mark":  "\xef\xbb\xbf{\"mcpServers\": {}}",
	} {
		t.Run(name, func(t *testing.T) {
			cfg := parseOK(t, src)
			if len(cfg.Names()) != 0 {
				t.Fatalf("names = %v", cfg.Names())
			}
		})
	}
}

func TestConfigLoad(t *testing.T) {
	dir := t.TempDir()

	missing := filepath.Join(dir, "nope", "config.json")
	cfg, err := LoadConfig(missing)
	if err != nil {
		t.Fatalf("missing file: %v", err)
	}
	if len(cfg.Names()) != 0 {
		t.Fatalf("missing file gave servers %v", cfg.Names())
	}
	_, err = cfg.Server("build")
	_, msg := checkConfigError(t, err, "")
	wantIn(t, msg, `"build"`, "no servers are configured", missing, "--url")

	good := filepath.Join(dir, "config.json")
	if err := os.WriteFile(good, []byte(`{"mcpServers":{"demo":{"url":"http://localhost:7777/mcp"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err = LoadConfig(good)
	if err != nil {
		t.Fatal(err)
	}
	if s, err := cfg.Server("demo"); err != nil || s.URL != "http://localhost:7777/mcp" {
		t.Fatalf("demo = %+v, %v", s, err)
	}

	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte("{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"x\",}\n  }\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = LoadConfig(bad)
	ce, msg := checkConfigError(t, err, bad)
	if ce.Line != 3 {
		t.Errorf("line = %d in %q", ce.Line, msg)
	}

	// A directory where the file should be: an error, not an empty config.
	_, err = LoadConfig(dir)
	_, msg = checkConfigError(t, err, dir)
	wantIn(t, msg, "cannot read")
}

func TestConfigParseSyntaxError(t *testing.T) {
	cases := []struct {
		name      string
		src       string
		line, col int
	}{
		{"trailing comma", "{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"x\",}\n  }\n}", 3, 26},
		{"missing colon", "{\"mcpServers\" {}}", 1, 15},
		{"unquoted key", "{\n\n   mcpServers: {}}", 3, 4},
		{"comment", "{\n  // servers\n  \"mcpServers\": {}\n}", 2, 3},
		{"truncated", "{\"mcpServers\": {\n", 1, 17},
		{"non-ASCII before the error", "{\"mcpServers\": {\"bücher\": {\"command\": \"x\"} x}}", 1, 44},
		{"garbage", "hello", 1, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ce, msg := parseErr(t, c.src)
			if ce.Line != c.line || ce.Column != c.col {
				t.Errorf("at line %d, column %d, want %d:%d (%s)", ce.Line, ce.Column, c.line, c.col, msg)
			}
			wantIn(t, msg, "line ", "column ", "invalid JSON", "fix")
		})
	}
}

func TestConfigParseTypeErrors(t *testing.T) {
	cases := []struct {
		name, src string
		parts     []string
	}{
		{"top level a list", `[1]`, []string{"want a JSON object", "got a list"}},
		{"mcpServers a list", `{"mcpServers": [{"command": "x"}]}`, []string{"mcpServers:", "want an object", "got a list"}},
		{"mcpServers a string", `{"mcpServers": "build"}`, []string{"mcpServers:", "want an object", "got a string"}},
		{"server a string", `{"mcpServers": {"build": "build-mcp"}}`, []string{"mcpServers.build:", "want an object", "got a string"}},
		{"server null", `{"mcpServers": {"build": null}}`, []string{"mcpServers.build:", "want an object", "got null"}},
		{"args a string", `{"mcpServers": {"build": {"command": "x", "args": "--stdio -v"}}}`, []string{"mcpServers.build.args:", "want a list of strings", "got a string"}},
		{"args an object", `{"mcpServers": {"build": {"command": "x", "args": {"a": 1}}}}`, []string{"mcpServers.build.args:", "want a list of strings"}},
		{"args holds a number", `{"mcpServers": {"build": {"command": "x", "args": ["--port", 8080]}}}`, []string{"mcpServers.build.args[1]:", "want a string", "got a number"}},
		{"env a list", `{"mcpServers": {"build": {"command": "x", "env": ["A=1"]}}}`, []string{"mcpServers.build.env:", "want an object of strings", "got a list"}},
		{"env value a number", `{"mcpServers": {"build": {"command": "x", "env": {"A": "1", "PORT": 8080}}}}`, []string{"mcpServers.build.env.PORT:", "want a string", "got a number"}},
		{"env value a bool", `{"mcpServers": {"build": {"command": "x", "env": {"DEBUG": true}}}}`, []string{"mcpServers.build.env.DEBUG:", "want a string", "got a boolean"}},
		{"env name with =", `{"mcpServers": {"build": {"command": "x", "env": {"A=B": "1"}}}}`, []string{"mcpServers.build.env", `"A=B"`}},
		{"headers value an object", `{"mcpServers": {"r": {"url": "https://x", "headers": {"X-A": {"v": 1}}}}}`, []string{"mcpServers.r.headers.X-A:", "want a string", "got an object"}},
		{"command a list", `{"mcpServers": {"build": {"command": ["npx", "x"]}}}`, []string{"mcpServers.build.command:", "want a string", "got a list"}},
		{"url a number", `{"mcpServers": {"r": {"url": 8080}}}`, []string{"mcpServers.r.url:", "want a string", "got a number"}},
		{"reattach a string", `{"mcpServers": {"r": {"url": "https://x", "reattach": "yes"}}}`, []string{"mcpServers.r.reattach:", `want true (every tool) or a list of tool names`, "got a string"}},
		{"reattach holds a number", `{"mcpServers": {"r": {"url": "https://x", "reattach": ["deploy", 1]}}}`, []string{"mcpServers.r.reattach:", "got a list"}},
		{"odd name is quoted", `{"mcpServers": {"my server.v2": {"command": "x", "args": 1}}}`, []string{`mcpServers["my server.v2"].args:`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, msg := parseErr(t, c.src)
			wantIn(t, msg, c.parts...)
		})
	}
}

func TestConfigParseSecretsStayOutOfMessages(t *testing.T) {
	_, msg := parseErr(t, `{"mcpServers": {"r": {"url": "https://x", "headers": {"Authorization": ["Bearer sk-secret-123"]}}}}`)
	if strings.Contains(msg, "sk-secret") {
		t.Fatalf("message leaks a header value: %q", msg)
	}
	_, msg = parseErr(t, `{"mcpServers": {"r": {"url": "ftp://user:sk-secret-123@host/x"}}}`)
	if strings.Contains(msg, "sk-secret") {
		t.Fatalf("message leaks the URL's password: %q", msg)
	}
}

func TestConfigParseValidation(t *testing.T) {
	cases := []struct {
		name, src string
		parts     []string
	}{
		{"both command and url", `{"mcpServers": {"x": {"command": "a", "url": "https://h/mcp"}}}`, []string{"mcpServers.x:", "both", "command", "url", "keep one"}},
		{"neither", `{"mcpServers": {"x": {"args": ["a"]}}}`, []string{"mcpServers.x:", "needs", "command", "url"}},
		{"both empty", `{"mcpServers": {"x": {"command": "", "url": ""}}}`, []string{"mcpServers.x:", "needs"}},
		{"empty name", `{"mcpServers": {"": {"command": "a"}}}`, []string{`mcpServers[""]`, "name is empty"}},
		{"blank name", `{"mcpServers": {"  ": {"command": "a"}}}`, []string{"name is empty"}},
		{"ftp scheme", `{"mcpServers": {"x": {"url": "ftp://h/mcp"}}}`, []string{"mcpServers.x.url:", `"ftp"`, "https://"}},
		{"ws scheme", `{"mcpServers": {"x": {"url": "ws://h/mcp"}}}`, []string{"mcpServers.x.url:", `"ws"`}},
		{"no scheme", `{"mcpServers": {"x": {"url": "h.example.com/mcp"}}}`, []string{"mcpServers.x.url:", "no scheme"}},
		{"no host", `{"mcpServers": {"x": {"url": "https:///mcp"}}}`, []string{"mcpServers.x.url:", "no host"}},
		{"port only", `{"mcpServers": {"x": {"url": "http://:8080/mcp"}}}`, []string{"mcpServers.x.url:", "no host"}},
		{"unparsable", `{"mcpServers": {"x": {"url": "http://h:port/mcp"}}}`, []string{"mcpServers.x.url:", "not a valid URL"}},
		{"unknown protocol", `{"mcpServers": {"x": {"command": "a", "protocol": "2025-06-18"}}}`, []string{"mcpServers.x.protocol:", `"2026-07-28", "2025-11-25"`, `not "2025-06-18"`}},
		{"protocol a number", `{"mcpServers": {"x": {"command": "a", "protocol": 2025}}}`, []string{"mcpServers.x.protocol:", "want a string", "got a number"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, msg := parseErr(t, c.src)
			wantIn(t, msg, c.parts...)
		})
	}
	// A pinned revision is kept.
	if s, _ := parseOK(t, `{"mcpServers": {"x": {"command": "a", "protocol": "2025-11-25"}}}`).Server("x"); s.Protocol != "2025-11-25" {
		t.Fatalf("protocol = %q, want 2025-11-25", s.Protocol)
	}
	// A URL that needs expansion is checked after expansion, not at load.
	cfg := parseOK(t, `{"mcpServers": {"x": {"url": "https://${HOST}/mcp"}}}`)
	s, _ := cfg.Server("x")
	if _, err := s.Expand(env(map[string]string{"HOST": "mcp.example.com"})); err != nil {
		t.Fatal(err)
	}
	_, err := s.Expand(env(map[string]string{"HOST": ""}))
	_, msg := checkConfigError(t, err, configPath)
	wantIn(t, msg, "mcpServers.x.url:", "expanded", "no host")
}

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

func TestConfigExpand(t *testing.T) {
	cfg := parseOK(t, `{"mcpServers": {
  "build": {"command": "${BIN_DIR}/build-mcp", "args": ["--token=${TOKEN}", "$HOME/x", "${A}${B}-${A}", "plain", "$", "${", "}"],
            "env": {"TOKEN": "${TOKEN}", "LIT": "$TOKEN", "MIXED": "a ${A} b ${B} c"}},
  "remote": {"url": "https://${HOST}:${PORT}/mcp", "headers": {"Authorization": "Bearer ${TOKEN}", "X-Fixed": "v"}}
}}`)
	lookup := env(map[string]string{"BIN_DIR": "/opt/bin", "TOKEN": "sk-1", "A": "x", "B": "y", "HOST": "mcp.example.com", "PORT": "8443"})

	build, _ := cfg.Server("build")
	got, err := build.Expand(lookup)
	if err != nil {
		t.Fatal(err)
	}
	if got.Command != "/opt/bin/build-mcp" {
		t.Errorf("command = %q", got.Command)
	}
	if want := []string{"--token=sk-1", "$HOME/x", "xy-x", "plain", "$", "${", "}"}; !slices.Equal(got.Args, want) {
		t.Errorf("args = %q, want %q", got.Args, want)
	}
	if want := map[string]string{"TOKEN": "sk-1", "LIT": "$TOKEN", "MIXED": "a x b y c"}; !reflect.DeepEqual(got.Env, want) {
		t.Errorf("env = %v, want %v", got.Env, want)
	}

	remote, _ := cfg.Server("remote")
	got, err = remote.Expand(lookup)
	if err != nil {
		t.Fatal(err)
	}
	if got.URL != "https://mcp.example.com:8443/mcp" || got.Headers["Authorization"] != "Bearer sk-1" || got.Headers["X-Fixed"] != "v" {
		t.Errorf("remote = %+v", got)
	}

	// Set to the empty string is set.
	if got, err := remote.Expand(env(map[string]string{"TOKEN": "", "HOST": "h", "PORT": "1"})); err != nil || got.Headers["Authorization"] != "Bearer " {
		t.Errorf("empty value: %+v, %v", got, err)
	}
}

func TestConfigExpandUnset(t *testing.T) {
	cfg := parseOK(t, `{"mcpServers": {
  "remote": {"url": "https://h/mcp", "headers": {"Authorization": "Bearer ${GITHUB_TOKEN}"}},
  "build": {"command": "b", "args": ["${OK}", "${MISSING_ARG}"]}
}}`)
	remote, _ := cfg.Server("remote")
	_, err := remote.Expand(env(nil))
	_, msg := checkConfigError(t, err, configPath)
	wantIn(t, msg, "GITHUB_TOKEN", `"remote"`, "not set", "mcpServers.remote.headers.Authorization", "export")

	build, _ := cfg.Server("build")
	_, err = build.Expand(env(map[string]string{"OK": "1"}))
	_, msg = checkConfigError(t, err, configPath)
	wantIn(t, msg, "MISSING_ARG", `"build"`, "args[1]")

	// Malformed references are errors, not silently kept.
	for _, ref := range []string{"${}", "${1ABC}", "${A-B}", "${VAR:-default}"} {
		s := ServerConfig{Name: "x", Command: "c", Args: []string{ref}}
		if _, err := s.Expand(env(map[string]string{"A": "1", "VAR": "v", "1ABC": "z"})); err == nil {
			t.Errorf("%s accepted", ref)
		} else {
			checkConfigError(t, err, "")
		}
	}
	// A command that expands to nothing.
	s := ServerConfig{Name: "x", Command: "${BIN}"}
	_, err = s.Expand(env(map[string]string{"BIN": ""}))
	_, msg = checkConfigError(t, err, "")
	wantIn(t, msg, "command", "empty")
}

func TestConfigExpandDoesNotMutate(t *testing.T) {
	cfg := parseOK(t, `{"mcpServers": {"build": {"command": "${B}", "args": ["${T}"], "env": {"T": "${T}"}, "url": ""},
  "remote": {"url": "https://${H}/mcp", "headers": {"Authorization": "Bearer ${T}"}}}}`)
	lookup := env(map[string]string{"B": "bin", "T": "secret", "H": "h"})
	for _, name := range cfg.Names() {
		s, err := cfg.Server(name)
		if err != nil {
			t.Fatal(err)
		}
		x, err := s.Expand(lookup)
		if err != nil {
			t.Fatal(err)
		}
		// Change the expanded copy's slices and maps too.
		if len(x.Args) > 0 {
			x.Args[0] = "changed"
		}
		for k := range x.Env {
			x.Env[k] = "changed"
		}
		for k := range x.Headers {
			x.Headers[k] = "changed"
		}
	}
	want := parseOK(t, `{"mcpServers": {"build": {"command": "${B}", "args": ["${T}"], "env": {"T": "${T}"}, "url": ""},
  "remote": {"url": "https://${H}/mcp", "headers": {"Authorization": "Bearer ${T}"}}}}`)
	if !reflect.DeepEqual(cfg, want) {
		t.Fatalf("the loaded config changed:\n%+v\nwant\n%+v", cfg, want)
	}
	// The value a caller gets from Server is a copy too.
	s, _ := cfg.Server("build")
	s.Args[0] = "changed"
	s.Env["T"] = "changed"
	if again, _ := cfg.Server("build"); again.Args[0] != "${T}" || again.Env["T"] != "${T}" {
		t.Fatalf("Server returned shared slices or maps: %+v", again)
	}
}

func TestConfigServerUnknownName(t *testing.T) {
	cfg := parseOK(t, `{"mcpServers": {"zeta": {"command": "z"}, "alpha": {"command": "a"}, "mid": {"url": "https://h"}}}`)
	_, err := cfg.Server("beta")
	_, msg := checkConfigError(t, err, "")
	wantIn(t, msg, `"beta"`, `"alpha", "mid", "zeta"`, configPath, "--url")

	// A name with control characters cannot break the line.
	_, err = cfg.Server("evil\nname\x1b[31m")
	_, msg = checkConfigError(t, err, "")
	if strings.Contains(msg, "\x1b") {
		t.Fatalf("message carries an escape: %q", msg)
	}

	// A config built in code, with no file.
	_, err = (&Config{}).Server("x")
	_, msg = checkConfigError(t, err, "")
	wantIn(t, msg, "no servers are configured", "--url")
	var nilCfg *Config
	if _, err := nilCfg.Server("x"); err == nil {
		t.Fatal("nil config found a server")
	}
	if nilCfg.Names() != nil {
		t.Fatal("nil config has names")
	}
}

func TestConfigAdHoc(t *testing.T) {
	for _, u := range []string{"http://127.0.0.1:8080/mcp", "https://mcp.example.com/mcp", "http://localhost/mcp", "https://[::1]:9000/"} {
		s, err := AdHoc(u)
		if err != nil || s.URL != u || s.Command != "" {
			t.Errorf("AdHoc(%q) = %+v, %v", u, s, err)
		}
	}
	for u, part := range map[string]string{
		"":                      "empty",
		"localhost:8080/mcp":    "no scheme",
		"ftp://h/x":             `"ftp"`,
		"https://":              "no host",
		"mcp.example.com":       "no scheme",
		"http://h:notaport/mcp": "not a valid URL",
	} {
		_, err := AdHoc(u)
		if err == nil {
			t.Errorf("AdHoc(%q) accepted", u)
			continue
		}
		_, msg := checkConfigError(t, err, "")
		wantIn(t, msg, "--url", part)
	}
}

func TestConfigIsLoopbackOrHTTPS(t *testing.T) {
	cases := map[string]bool{
		"http://127.0.0.1:8080/mcp":    true,
		"http://127.1.2.3/mcp":         true,
		"http://[::1]:8080/mcp":        true,
		"http://localhost:8080/mcp":    true,
		"http://LOCALHOST/mcp":         true,
		"http://demo.localhost/mcp":    true,
		"https://mcp.example.com/mcp":  true,
		"https://203.0.113.7/mcp":      true,
		"http://mcp.example.com/mcp":   false,
		"http://203.0.113.7:8080/mcp":  false,
		"http://10.0.0.5/mcp":          false,
		"http://localhost.example.com": false,
		"http://[::ffff:8.8.8.8]/":     false,
		"http://0.0.0.0:8080/":         false,
	}
	for u, want := range cases {
		if got := (ServerConfig{URL: u}).IsLoopbackOrHTTPS(); got != want {
			t.Errorf("%s: %v, want %v", u, got, want)
		}
	}
	if !(ServerConfig{Command: "build-mcp"}).IsLoopbackOrHTTPS() {
		t.Error("a stdio server is local")
	}
}

// The agents' and the proxy's keys are checked as the servers' are.
func TestConfigUnknownAgentAndProxyKeys(t *testing.T) {
	_, msg := parseErr(t, `{"mcpServers": {}, "agents": {"bot": {"token": "${BOT_TOKEN}", "server": ["x"]}}}`)
	wantIn(t, msg, `agents.bot.server`, `did you mean "servers"?`)
	_, msg = parseErr(t, `{"mcpServers": {}, "proxy": {"origin": ["https://a.example"]}}`)
	wantIn(t, msg, `proxy.origin`, `did you mean "origins"?`)
}

// "retention": {"finished": DURATION} is read; anything else is refused
// in one line naming the field.
func TestConfigRetention(t *testing.T) {
	if got := parseOK(t, `{"retention": {"finished": "720h"}}`).Retention.Finished; got.Hours() != 720 {
		t.Fatalf("retention.finished = %v, want 720h", got)
	}
	if got := parseOK(t, `{"retention": {"finished": "30d"}}`).Retention.Finished; got.Hours() != 720 {
		t.Fatalf("retention.finished = %v, want 30 days, as prune --older-than 30d reads it", got)
	}
	if got := parseOK(t, `{}`).Retention.Finished; got != 0 {
		t.Fatalf("no retention = %v, want 0", got)
	}
	for src, want := range map[string]string{
		`{"retention": {"finished": "30x"}}`:  `retention.finished: want an age of at least 1m0s such as "30d"`,
		`{"retention": {"finished": "1s"}}`:   `got "1s"`,
		`{"retention": {"finshed": "720h"}}`:  `did you mean "finished"?`,
		`{"retention": {}}`:                   `retention: want {"finished": "720h"}`,
		`{"retention": "720h"}`:               `retention: want {"finished": "720h"}, got a string`,
		`{"retension": {"finished": "720h"}}`: `did you mean "retention"?`,
		`{"retention": {"finished": 720}}`:    `retention.finished: want a duration such as "720h" (quote it), got a number`,
	} {
		_, msg := parseErr(t, src)
		wantIn(t, msg, want)
	}
}

// ParseAge reads what `prune --older-than` and "retention" take.
func TestParseAge(t *testing.T) {
	for _, c := range []struct {
		in   string
		want time.Duration
	}{
		{"0", 0}, {"3d", 72 * time.Hour}, {"1d12h", 36 * time.Hour}, {"90m", 90 * time.Minute}, {"2.5h", 150 * time.Minute},
	} {
		if got, err := ParseAge(c.in); err != nil || got != c.want {
			t.Errorf("ParseAge(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	for _, in := range []string{"", "d", "-1d", "3x", "1h2d", "99999999999d", "3 d"} {
		if got, err := ParseAge(in); err == nil {
			t.Errorf("ParseAge(%q) = %v, want an error", in, got)
		}
	}
}
