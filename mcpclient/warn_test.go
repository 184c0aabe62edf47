package mcpclient

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/taskdeck/taskdeck/model"
)

// TestPoolWarnsBeforeDialing: Pool warns about plain http to a
// non-loopback host before it connects. The context is cancelled before
// Session is called, so nothing is ever dialled (net/http checks the
// context before it opens a connection): the warning cannot have come
// from traffic, and no traffic leaves the machine.
func TestPoolWarnsBeforeDialing(t *testing.T) {
	cases := map[string]bool{
		"http://192.0.2.1:9/mcp":       true,
		"http://10.0.0.1:9/mcp":        true,
		"http://[2001:db8::1]:9/mcp":   true,
		"https://192.0.2.1:9/mcp":      false,
		"http://127.0.0.1:9/mcp":       false,
		"http://localhost:9/mcp":       false,
		"http://[::1]:9/mcp":           false,
		"http://build.localhost:9/mcp": false,
		"https://[2001:db8::1]:9/path": false,
	}
	for u, want := range cases {
		var warned []string
		p := NewPool(PoolOptions{Warn: func(msg string) { warned = append(warned, msg) }})
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := p.Session(ctx, model.ServerRef{URL: u})
		p.Close()
		if err == nil {
			t.Fatalf("%s: connected with a cancelled context", u)
		}
		if !errors.Is(err, context.Canceled) && !strings.Contains(err.Error(), "context canceled") {
			t.Fatalf("%s: %v, want the cancelled context to stop it before any dial", u, err)
		}
		if got := len(warned) == 1; got != want {
			t.Errorf("%s: warned %q, want a warning: %v", u, warned, want)
		}
		if want && len(warned) == 1 && !strings.Contains(warned[0], "plain http on a non-loopback address") {
			t.Errorf("%s: warning %q", u, warned[0])
		}
	}
}
