package proxy

import (
	"net/url"
	"testing"

	"github.com/taskdeck/taskdeck/demo"
)

// A web page's requests are refused before anything is read: the
// cross-site "simple" POST a page sends with mode no-cors (no preflight),
// and the same page after DNS rebinding (its Host is the page's name).
// The demo server receives nothing of either; an allowed origin and a
// configured host name pass.
func TestBrowserRequestsRefused(t *testing.T) {
	r := startRig(t, demo.Options{}, Options{})
	u, err := url.Parse(r.url)
	if err != nil {
		t.Fatal(err)
	}
	call := `{"name":"sleep","arguments":{"seconds":1},"_meta":` + metaJSON("page", true) + `}`
	for _, c := range []struct {
		name string
		hdr  map[string]string
	}{
		{"cross-site", map[string]string{"Origin": "http://evil.example", "Content-Type": "text/plain;charset=UTF-8", "Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors"}},
		{"rebound", map[string]string{"Host": "rebind.evil.example:" + u.Port(), "Origin": "http://rebind.evil.example:" + u.Port(), "Content-Type": "text/plain;charset=UTF-8"}},
		{"rebound without origin", map[string]string{"Host": "rebind.evil.example:" + u.Port()}},
		{"null origin", map[string]string{"Origin": "null"}},
		{"loopback name, other port", map[string]string{"Host": "localhost:1"}},
	} {
		status, a := rpc(t, r.url, "tools/call", call, c.hdr)
		if status != 403 || a.Error == nil {
			t.Errorf("%s: HTTP %d %+v, want 403", c.name, status, a)
		}
		if status, _ := rpc(t, r.url, "tasks/get", `{"taskId":"x","_meta":`+metaJSON("page", true)+`}`, c.hdr); status != 403 {
			t.Errorf("%s tasks/get: HTTP %d, want 403", c.name, status)
		}
	}
	if n := len(r.srv.Requests("")); n != 0 {
		t.Fatalf("the server received %d requests from a web page", n)
	}
	if n := len(mustList(t, r)); n != 0 {
		t.Fatalf("%d records from a web page", n)
	}
	// The proxy's own address under each loopback name passes.
	for _, host := range []string{"127.0.0.1:" + u.Port(), "localhost:" + u.Port(), "[::1]:" + u.Port()} {
		if status, a := rpc(t, r.url, "tools/list", `{"_meta":`+metaJSON("a", false)+`}`, map[string]string{"Host": host}); status != 200 || a.Error != nil {
			t.Errorf("Host %s: HTTP %d %+v", host, status, a)
		}
	}
}

// The config's proxy.origins and proxy.hosts let a named web app and a
// name of the proxy's through; others stay out.
func TestBrowserAllowList(t *testing.T) {
	srv := startRig(t, demo.Options{}, Options{}).srv
	r := startRigWith(t, srv, `{"mcpServers":{"demo":{"url":"`+srv.URL+`"}},"proxy":{"origins":["https://app.example"],"hosts":["taskdeck.internal"]}}`, Options{})
	list := `{"_meta":` + metaJSON("a", false) + `}`
	for _, c := range []struct {
		hdr  map[string]string
		want int
	}{
		{map[string]string{"Origin": "https://app.example"}, 200},
		{map[string]string{"Origin": "https://APP.example"}, 200},
		{map[string]string{"Origin": "http://app.example"}, 403},
		{map[string]string{"Host": "taskdeck.internal:8810"}, 200},
		{map[string]string{"Host": "taskdeck.internal"}, 200},
		{map[string]string{"Host": "other.internal"}, 403},
	} {
		if status, _ := rpc(t, r.url, "tools/list", list, c.hdr); status != c.want {
			t.Errorf("%v: HTTP %d, want %d", c.hdr, status, c.want)
		}
	}
}
