package config

import (
	"strings"
	"testing"
)

// Userinfo, query strings and fragments of URLs in any text are
// redacted; the rest of the URL and of the text is kept.
func TestRedactURLs(t *testing.T) {
	for in, want := range map[string]string{
		`Post "http://127.0.0.1:8080/mcp?token=s3cret": EOF`:    `Post "http://127.0.0.1:8080/mcp?redacted": EOF`,
		`to https://user:s3cret@example.com/mcp, then`:          `to https://redacted@example.com/mcp, then`,
		`at http://example.com/mcp#s3cret.`:                     `at http://example.com/mcp#redacted.`,
		`http://a/x?s3cret and http://b/y?s3cret`:               `http://a/x?redacted and http://b/y?redacted`,
		`no url here: s3cret`:                                   `no url here: s3cret`,
		`plain http://127.0.0.1:8080/mcp stays`:                 `plain http://127.0.0.1:8080/mcp stays`,
		`calling "tools/call": Post "http://h/mcp?t=s3cret": x`: `calling "tools/call": Post "http://h/mcp?redacted": x`,
	} {
		if got := RedactURLs(in); got != want {
			t.Errorf("RedactURLs(%q) = %q, want %q", in, got, want)
		}
	}
}

// A URL that is wrong once ${VAR} is expanded is reported without any
// part of it: the variable may be in any part, the port included.
func TestExpandedURLErrorHoldsNoSecret(t *testing.T) {
	const secret = "s3cretvalue"
	cfg, err := ParseConfig("c.json", []byte(`{"mcpServers":{
		"port":{"url":"http://127.0.0.1:${T}/mcp"},
		"host":{"url":"http://${T}%zz/mcp"},
		"scheme":{"url":"${T}://127.0.0.1/mcp"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	lookup := func(string) (string, bool) { return secret, true }
	for _, name := range cfg.Names() {
		s, err := cfg.Server(name)
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.Expand(lookup)
		if err == nil {
			t.Fatalf("%s: no error", name)
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("%s: the error holds the secret: %v", name, err)
		}
	}
}

// A variable whose value would end a URL in an error text early (a quote,
// a space) is refused: the redaction works URL by URL, and the tail after
// such a character would be left as it is.
func TestExpandedURLThatRedactionCannotBoundIsRefused(t *testing.T) {
	cfg, err := ParseConfig("c.json", []byte(`{"mcpServers":{"web":{"url":"http://127.0.0.1:1/mcp?token=${T}"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	s, err := cfg.Server("web")
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{`abc"SECRETTAIL`, "abc SECRETTAIL", "abc'SECRETTAIL", "abc\x07SECRETTAIL"} {
		_, err := s.Expand(func(string) (string, bool) { return secret, true })
		if err == nil || strings.Contains(err.Error(), "SECRETTAIL") {
			t.Errorf("token %q: %v; want a refusal that does not quote it", secret, err)
		}
	}
	if _, err := s.Expand(func(string) (string, bool) { return "abc%22def", true }); err != nil {
		t.Errorf("a percent-encoded token was refused: %v", err)
	}
}
