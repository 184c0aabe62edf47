package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strings"
)

// checkURL says what is wrong with a server URL, or "". quote tells
// whether the message may quote parts of it: not once ${VAR} is expanded,
// as the variable may be in any part.
func checkURL(raw string, quote bool) string {
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error repeats the whole URL, secrets included
		}
		if !quote {
			return "not a valid URL; write it as https://host[:port]/path"
		}
		return fmt.Sprintf("not a valid URL (%v); write it as https://host[:port]/path", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		if u.Scheme == "" || !strings.Contains(raw, "://") {
			return "has no scheme; write it as https://host[:port]/path (or http:// for a local server)"
		}
		if !quote {
			return "its scheme is not supported; use https:// (or http:// for a local server)"
		}
		return fmt.Sprintf("scheme %q is not supported; use https:// (or http:// for a local server)", u.Scheme)
	}
	if u.Host == "" || u.Hostname() == "" {
		return "has no host; write it as https://host[:port]/path"
	}
	return ""
}

// RedactURL returns raw with what may hold a secret (userinfo, the query
// string, the fragment) replaced by "redacted", for messages and logs.
// What does not parse as a URL is returned as it is: nothing to redact.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return raw
	}
	if u.User != nil {
		u.User = url.User("redacted")
	}
	if u.RawQuery != "" || u.ForceQuery {
		u.RawQuery, u.ForceQuery = "redacted", false
	}
	if u.Fragment != "" {
		u.Fragment, u.RawFragment = "redacted", ""
	}
	return u.String()
}

// urlInText finds URLs in free text (error messages of net/http and
// go-sdk quote the URL they were given, secrets included).
var urlInText = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://[^\s"'<>]+`)

// RedactURLs applies RedactURL to every URL in s.
func RedactURLs(s string) string {
	if !strings.Contains(s, "://") {
		return s
	}
	return urlInText.ReplaceAllStringFunc(s, func(u string) string {
		trimmed := strings.TrimRight(u, ".,;:)]")
		return RedactURL(trimmed) + u[len(trimmed):]
	})
}

// AdHoc makes a ServerConfig for --url, validated like a configured one.
func AdHoc(rawURL string) (ServerConfig, error) {
	s := ServerConfig{URL: rawURL}
	if strings.TrimSpace(rawURL) == "" {
		return ServerConfig{}, &ConfigError{Where: "--url", Msg: "is empty; pass the server's address, e.g. --url http://127.0.0.1:8080/mcp"}
	}
	if !strings.Contains(rawURL, "${") {
		if msg := checkURL(rawURL, true); msg != "" {
			return ServerConfig{}, &ConfigError{Where: "--url", Msg: msg}
		}
	}
	return s, nil
}

// IsLoopbackOrHTTPS is false when a non-loopback host is reached over plain
// http (the caller warns). Stdio servers are local, so true. Call it on an
// expanded config.
func (s ServerConfig) IsLoopbackOrHTTPS() bool {
	if s.URL == "" {
		return s.Command != ""
	}
	u, err := url.Parse(s.URL)
	if err != nil {
		return false
	}
	switch strings.ToLower(u.Scheme) {
	case "https":
		return true
	case "http":
		host := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
		if host == "localhost" || strings.HasSuffix(host, ".localhost") {
			return true
		}
		ip := net.ParseIP(host)
		return ip != nil && ip.IsLoopback()
	}
	return false
}
