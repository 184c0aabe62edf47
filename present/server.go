package present

import (
	"net/url"
	"strings"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/termtext"
)

// ServerName is how a task's server shows: its configured name; for an
// ad-hoc URL, the name of a configured server with the same URL, else
// host:port and the path where it is not the usual /mcp (never the
// query or userinfo, which may hold secrets).
func ServerName(ref model.ServerRef, configured []deck.Server) string {
	if ref.Name != "" || ref.URL == "" {
		return termtext.Line(ref.Name)
	}
	want := sameURL(ref.URL)
	for _, s := range configured {
		if !s.Stdio && sameURL(s.Target) == want {
			return termtext.Line(s.Name)
		}
	}
	u, err := url.Parse(ref.URL)
	if err != nil || u.Host == "" {
		return termtext.Line(ref.URL)
	}
	name := u.Host
	if p := strings.TrimSuffix(u.Path, "/"); p != "" && p != "/mcp" {
		name += p
	}
	return termtext.Line(name)
}

// sameURL is a URL as compared: case-insensitive scheme and host, no
// trailing slash, and what RedactURL hides hidden (the configured
// targets are redacted).
func sameURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	u.Scheme, u.Host = strings.ToLower(u.Scheme), strings.ToLower(u.Host)
	u.Path = strings.TrimSuffix(u.Path, "/")
	return strings.TrimSuffix(stripSecrets(u.String()), "/")
}

func stripSecrets(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return s
	}
	u.User, u.RawQuery, u.Fragment, u.RawFragment, u.ForceQuery = nil, "", "", "", false
	return u.String()
}

// ServerDetail is a task's server in full: its shown name, and the URL
// (redacted where configured, as recorded where ad hoc) when that differs,
// as `get` and the dashboard's detail pane show it.
func ServerDetail(ref model.ServerRef, configured []deck.Server) string {
	name := ServerName(ref, configured)
	if ref.URL != "" && name != termtext.Line(ref.URL) {
		return name + "  (" + termtext.Line(stripSecrets(ref.URL)) + ")"
	}
	return name
}
