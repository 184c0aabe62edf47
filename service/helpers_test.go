package service

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/internal/waitfor"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/engine"
	"github.com/taskdeck/taskdeck/internal/hostile"
	mcpconfig "github.com/taskdeck/taskdeck/mcpclient/config"
	"github.com/taskdeck/taskdeck/model"
)

var demoRef = model.ServerRef{Name: "demo"}

// startDemo runs the demo tasks server on loopback behind a hostile front
// that counts, and on request holds, what it receives.
func startDemo(t testing.TB) *hostile.Server {
	return hostile.Start(t, demo.Options{Speed: 0.05})
}

// openEngine opens the real engine on dir, its config naming mcp "demo".
func openEngine(t testing.TB, dir, mcpURL string) (*engine.Engine, error) {
	cfg, err := mcpconfig.ParseConfig("test.json", fmt.Appendf(nil, `{"mcpServers":{"demo":{"url":%q}}}`, mcpURL))
	if err != nil {
		t.Fatal(err)
	}
	return engine.Open(engine.Options{DataDir: dir, Config: cfg, RequestTimeout: 5 * time.Second,
		Policy: model.PollPolicy{Default: 20 * time.Millisecond, Floor: 5 * time.Millisecond, Cap: 200 * time.Millisecond, Growth: 1.5}})
}

// own is Open's Own over the engine.
func own(t testing.TB, dir, mcpURL string) func() (deck.Deck, error) {
	return func() (deck.Deck, error) {
		e, err := openEngine(t, dir, mcpURL)
		if err != nil {
			return nil, err
		}
		return e, nil
	}
}

// serveEngine serves the engine on a fresh data dir and dials it.
func serveEngine(t *testing.T, mcp *hostile.Server) (dir string, e *engine.Engine, srv *Server, r deck.Deck) {
	t.Helper()
	dir = t.TempDir()
	e, err := openEngine(t, dir, mcp.URL)
	if err != nil {
		t.Fatal(err)
	}
	srv, err = Serve(t.Context(), dir, e, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		srv.Shutdown(context.Background())
		e.Close()
	})
	r, err = Dial(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return dir, e, srv, r
}

func sleepCall(key string) deck.CallRequest {
	return deck.CallRequest{Server: demoRef, Tool: "sleep", Args: json.RawMessage(`{"seconds":60}`), Key: key}
}

var confirmYes = map[string]json.RawMessage{"confirm": json.RawMessage(`{"action":"accept","content":{"confirm":true}}`)}

// sameJSON reports whether two values encode alike: what crossed the
// socket is what the deck returned.
func sameJSON(t *testing.T, got, want any) {
	t.Helper()
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if !bytes.Equal(g, w) {
		t.Fatalf("over the socket:\n%s\nin process:\n%s", g, w)
	}
}

// nextOf returns the feed's next event of one of kinds, failing after 5 s (scaled).
func nextOf(t *testing.T, f deck.Feed, kinds ...deck.EventKind) deck.Event {
	t.Helper()
	timeout := time.After(waitfor.Scale(5 * time.Second))
	for {
		select {
		case ev, ok := <-f.Events():
			if !ok {
				t.Fatalf("the feed ended: %v", f.Err())
			}
			for _, k := range kinds {
				if ev.Kind == k {
					return ev
				}
			}
		case <-timeout:
			t.Fatalf("no %v event within 5 s", kinds)
		}
	}
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	waitfor.Within(t, d, what, cond)
}
