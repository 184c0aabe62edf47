package mcpclient

import (
	"context"
	"net/http"
	"net/url"
	"testing"
)

func TestHeaderValue(t *testing.T) {
	for in, want := range map[string]string{
		"task-1":           "task-1",
		"=?base64?=":       "=?base64?=", // too short to be an encoded value
		"=?base64?x?=":     "=?base64?PT9iYXNlNjQ/eD89?=",
		"=?base64??=":      "=?base64?PT9iYXNlNjQ/Pz0=?=",
		"tâche":            "=?base64?dMOiY2hl?=",
		"a\nb":             "=?base64?YQpi?=",
		"=?base64?a\nb?=":  "=?base64?PT9iYXNlNjQ/YQpiPz0=?=",
		"x=?base64?task?=": "x=?base64?task?=",
		"=?base64?task?= ": "=?base64?task?= ",
	} {
		if got := headerValue(in); got != want {
			t.Errorf("headerValue(%q) = %q, want %q", in, got, want)
		}
	}
}

// roundTripFunc records what reaches the network.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// The configured headers and Mcp-Name reach every request; the caller's
// request is never changed, and is sent as it is only when it already
// carries them.
func TestHeaderTransportClonesOnlyWhenNeeded(t *testing.T) {
	var sent *http.Request
	ht := &headerTransport{
		base: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			sent = r
			return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: http.NoBody}, nil
		}),
		headers: map[string]string{"Authorization": "Bearer t"},
		url:     &url.URL{Scheme: "http", Host: "127.0.0.1:1"},
	}
	ctx := withCallInfo(context.Background(), &callInfo{taskID: "task-1"})
	for _, tc := range []struct {
		name   string
		header http.Header
		same   bool
	}{
		{"bare", http.Header{}, false},
		{"no Mcp-Name", http.Header{"Authorization": {"Bearer t"}}, false},
		{"another token", http.Header{"Authorization": {"Bearer u"}, "Mcp-Name": {"task-1"}}, false},
		{"twice", http.Header{"Authorization": {"Bearer t", "Bearer u"}, "Mcp-Name": {"task-1"}}, false},
		{"ready", http.Header{"Authorization": {"Bearer t"}, "Mcp-Name": {"task-1"}}, true},
	} {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://127.0.0.1:1/mcp", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header = tc.header
		before := tc.header.Clone()
		if _, err := ht.RoundTrip(req); err != nil {
			t.Fatal(err)
		}
		if (sent == req) != tc.same {
			t.Errorf("%s: sent the caller's request: %v, want %v", tc.name, sent == req, tc.same)
		}
		if got := sent.Header.Values("Authorization"); len(got) != 1 || got[0] != "Bearer t" {
			t.Errorf("%s: Authorization = %q", tc.name, got)
		}
		if got := sent.Header.Get("Mcp-Name"); got != "task-1" {
			t.Errorf("%s: Mcp-Name = %q", tc.name, got)
		}
		if len(req.Header) != len(before) || req.Header.Get("Authorization") != before.Get("Authorization") {
			t.Errorf("%s: the caller's headers changed: %v, were %v", tc.name, req.Header, before)
		}
	}
}

// The configured headers go to the configured origin only: a request for
// any other host, port or scheme is sent as it is.
func TestHeaderTransportKeepsHeadersToItsOrigin(t *testing.T) {
	var sent *http.Request
	u, _ := url.Parse("http://127.0.0.1:8080/mcp?token=x")
	ht := &headerTransport{
		base: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			sent = r
			return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: http.NoBody}, nil
		}),
		headers: map[string]string{"Authorization": "Bearer t", "X-Api-Key": "t"},
		url:     u,
	}
	for target, want := range map[string]bool{
		"http://127.0.0.1:8080/other": true,
		"HTTP://127.0.0.1:8080/mcp":   true,
		"http://127.0.0.2:8080/mcp":   false,
		"http://127.0.0.1:8081/mcp":   false,
		"https://127.0.0.1:8080/mcp":  false,
		"http://localhost:8080/mcp":   false,
		"http://127.0.0.1/mcp":        false,
		"http://127.0.0.1:8080@x/mcp": false,
	} {
		req, err := http.NewRequest(http.MethodPost, target, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ht.RoundTrip(req); err != nil {
			t.Fatal(err)
		}
		if got := sent.Header.Get("Authorization") != "" || sent.Header.Get("X-Api-Key") != ""; got != want {
			t.Errorf("%s: headers sent %v, want %v", target, got, want)
		}
	}
}
