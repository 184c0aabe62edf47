package config

import (
	"strings"
	"testing"
)

// FuzzParseConfig: the parser never panics, its errors are one line, and
// an accepted config expands (or refuses to) without ever quoting the
// value of a variable, which may be a secret.
func FuzzParseConfig(f *testing.F) {
	for _, seed := range []string{
		`{"mcpServers":{"build":{"command":"build-mcp","args":["--stdio","${HOME}"],"env":{"TOKEN":"${TOKEN}"}}}}`,
		`{"mcpServers":{"api":{"url":"https://api.example.com/mcp","headers":{"Authorization":"Bearer ${TOKEN}"}}}}`,
		`{"mcpServers":{"api":{"url":"${BASE}/mcp"}}}`,
		`{"mcpServers":{"a":{"url":"http://127.0.0.1:1/mcp",}}}`,
		`{"mcpServers":{"a":{"command":5}}}`,
		`{"mcpServers":["a"]}`,
		`{"mcpServers":{"a":{"command":"x","url":"http://h/"}}}`,
		`{"mcpServers":{"a":{"args":{"x":1},"env":[1],"headers":"h"}}}`,
		`{"mcpServers":{"\u001b[2Jevil\u009b":{"command":"\u001b]0;t\u0007","env":{"\u0000":"${A B}"}}}}`,
		`{"mcpServers":{"a":{"url":"ftp://x"}},"other":1}`,
		"\xef\xbb\xbf{}", `[]`, `null`, `"x"`, ``, `{"mcpServers":null}`, `{"mcpServers":{"a":null}}`,
	} {
		f.Add([]byte(seed))
	}
	const secret = "s3cr3t-VALUE-9f8e7d"
	lookup := func(name string) (string, bool) {
		if name == "UNSET" {
			return "", false
		}
		if name == "EMPTY" {
			return "", true
		}
		return secret, true
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := ParseConfig("fuzz.json", data)
		if err != nil {
			if strings.ContainsAny(err.Error(), "\r\n") {
				t.Fatalf("error is not one line: %q", err)
			}
			return
		}
		for _, name := range cfg.Names() {
			s, err := cfg.Server(name)
			if err != nil {
				t.Fatalf("listed server %q cannot be looked up: %v", name, err)
			}
			if (s.Command == "") == (s.URL == "") {
				t.Fatalf("server %q: want exactly one of command and url: %+v", name, s)
			}
			x, err := s.Expand(lookup)
			if err != nil {
				if msg := err.Error(); strings.ContainsAny(msg, "\r\n") || strings.Contains(msg, secret) {
					t.Fatalf("expand error is not one line or quotes a secret: %q", msg)
				}
				continue
			}
			if x.Command == "" && x.URL == "" {
				t.Fatalf("server %q expands to nothing to reach", name)
			}
			// The loaded config keeps the ${VAR} text.
			if again, _ := cfg.Server(name); strings.Contains(again.URL+strings.Join(mapValues(again.Headers), ""), secret) {
				t.Fatalf("Expand changed the loaded config of %q", name)
			}
		}
	})
}

func mapValues(m map[string]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	return out
}
