package proxy

import (
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"sync"
	"testing"

	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/internal/nodetest"
)

// serverScenarios are the suite's server scenarios at 2026-07-28 that
// the demo server can answer (the others need the suite's own tools,
// prompts and resources), and every tasks extension scenario.
var serverScenarios = []string{
	"server-stateless", "http-header-validation", "http-custom-header-server-validation", "tools-list",
	"caching", "json-schema-2020-12", "sep-2164-resource-not-found",
	"tasks-lifecycle", "tasks-capability-negotiation", "tasks-wire-fields", "tasks-request-state-removal",
	"tasks-mrtr-input", "tasks-request-headers", "tasks-dispatch-and-envelope", "tasks-status-notifications",
	"tasks-required-task-error", "tasks-mrtr-composition",
}

// heldChecks are the checks the proxy fails on purpose: it holds an agent
// that does not declare the tasks extension until its task ends, where a
// server answers -32021 (README, "What the agent sees through the proxy").
var heldChecks = []string{"sep-2663-server-returns-missing-capability-when-required"}

// The official conformance suite's server scenarios, against the demo
// server directly and through the proxy: the proxy passes every check the
// server passes, but the hold. (dns-rebinding-protection is left out: the
// suite reaches the proxy through withToken, whose Host is the proxy's;
// TestBrowserRequestsRefused covers a rebound Host.)
func TestConformanceServerThroughProxy(t *testing.T) {
	s := nodetest.Conformance(t)
	r := startRig(t, demo.Options{}, Options{})
	proxied := withToken(t, r.base) + "/mcp/demo"
	type outcome struct {
		direct, proxied []nodetest.Check
		out             string
	}
	results := make([]outcome, len(serverScenarios))
	// Each run mostly waits (Node's start, the scenario's own waits): a
	// few at once keep the whole within minutes.
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i, sc := range serverScenarios {
		for _, url := range []string{r.srv.URL, proxied} {
			wg.Go(func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				checks, out, err := s.Run(nil, "server", "--url", url, "--scenario", sc)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					t.Errorf("%s against %s: %v", sc, url, err)
				}
				if url == proxied {
					results[i].proxied = checks
					results[i].out = out
				} else {
					results[i].direct = checks
				}
			})
		}
	}
	wg.Wait()
	var sumDirect, sumProxied, sumTotal int
	for i, sc := range serverScenarios {
		direct, proxied := results[i].direct, results[i].proxied
		dp, dt := nodetest.Scored(direct)
		pp, pt := nodetest.Scored(proxied)
		sumDirect, sumProxied, sumTotal = sumDirect+dp, sumProxied+pp, sumTotal+dt
		t.Logf("%-38s direct %2d/%-2d proxied %2d/%-2d", sc, dp, dt, pp, pt)
		// By check id: a scenario may make one check several times.
		passed := map[string]int{}
		for _, c := range direct {
			if c.Status == "SUCCESS" {
				passed[c.ID]++
			}
		}
		for _, c := range proxied {
			if c.Status == "SUCCESS" {
				passed[c.ID]--
			}
		}
		bad := false
		for _, c := range proxied {
			if passed[c.ID] > 0 && c.Status != "SUCCESS" && !slices.Contains(heldChecks, c.ID) {
				t.Errorf("%s: %s passes against the server, %s through the proxy: %s", sc, c.ID, c.Status, c.ErrorMessage)
				passed[c.ID], bad = 0, true
			}
		}
		for id, n := range passed {
			if n > 0 && !slices.Contains(heldChecks, id) {
				t.Errorf("%s: %s passes against the server, is not made through the proxy", sc, id)
				bad = true
			}
		}
		if bad {
			t.Logf("through the proxy:\n%s", results[i].out)
		}
	}
	t.Logf("every scenario: direct %d/%d, proxied %d", sumDirect, sumTotal, sumProxied)
}

// withToken fronts the proxy at base with a forwarder that presents the
// test agent's token: the suite sends no credential, and the proxy wants
// one on every address. It rewrites Host to the proxy's, streams answers
// as they come, and changes nothing else.
func withToken(t *testing.T, base string) string {
	t.Helper()
	target, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(&httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Header.Set("Authorization", "Bearer "+testToken)
		},
		FlushInterval: -1,
	})
	t.Cleanup(front.Close)
	return front.URL
}
