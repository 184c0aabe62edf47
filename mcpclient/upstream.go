package mcpclient

import (
	"net/http"
	"net/url"
	"os"

	"github.com/taskdeck/taskdeck/mcpclient/config"
)

// Upstream is a configured HTTP server reached as raw HTTP, for requests
// taskdeck relays without reading them (the proxy's passthrough): the
// config's headers go to its origin only, redirects are refused, and every
// answer is bounded as the session's are.
type Upstream struct {
	URL    string       // expanded: it may hold a secret, never print it
	Client *http.Client // adds the headers, refuses redirects, bounds answers
}

// NewUpstream expands cfg (lookup: os.LookupEnv when nil) and builds its
// client. A stdio server has no upstream URL: an error.
func NewUpstream(cfg config.ServerConfig, lookup func(string) (string, bool)) (*Upstream, error) {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	cfg, err := cfg.Expand(lookup)
	if err != nil {
		return nil, err
	}
	if cfg.URL == "" {
		return nil, cfg.Refuse("a stdio server cannot be reached over HTTP")
	}
	u, err := url.Parse(cfg.URL)
	if err != nil {
		return nil, err // checked when the config was loaded
	}
	pooled := pooledTransport(DefaultPerServer)
	ht := &headerTransport{base: pooled, alone: aloneTransport(pooled), headers: cfg.Headers, url: u}
	return &Upstream{URL: cfg.URL, Client: &http.Client{Transport: boundedTransport{ht}, CheckRedirect: refuseRedirects}}, nil
}
