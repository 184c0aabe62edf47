package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/internal/waitfor"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/internal/hostile"
	mcpconfig "github.com/taskdeck/taskdeck/mcpclient/config"
	"github.com/taskdeck/taskdeck/model"
)

var demoRef = model.ServerRef{Name: "demo"}

// fastPolicy polls every few milliseconds; the server's pollIntervalMs
// still bounds it from below.
var fastPolicy = model.PollPolicy{Default: 20 * time.Millisecond, Floor: 5 * time.Millisecond, Cap: 200 * time.Millisecond, Growth: 1.5}

// startDemo runs a demo server behind a hostile front on loopback, which
// counts what it receives.
func startDemo(t *testing.T, opts demo.Options) *hostile.Server {
	t.Helper()
	if opts.Speed == 0 {
		opts.Speed = 0.05
	}
	return hostile.Start(t, opts)
}

// config names srv "demo".
func config(t *testing.T, srv *hostile.Server) *mcpconfig.Config {
	t.Helper()
	cfg, err := mcpconfig.ParseConfig("test.json", fmt.Appendf(nil, `{"mcpServers":{"demo":{"url":%q}}}`, srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// open opens an engine over dir; it is closed when the test ends.
func open(t *testing.T, dir string, srv *hostile.Server, opts Options) *Engine {
	t.Helper()
	opts.DataDir = dir
	if opts.Config == nil {
		opts.Config = config(t, srv)
	}
	if opts.Policy == (model.PollPolicy{}) {
		opts.Policy = fastPolicy
	}
	if opts.RequestTimeout == 0 {
		opts.RequestTimeout = 5 * time.Second
	}
	e, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitfor.Scale(60*time.Second))
	t.Cleanup(cancel)
	return ctx
}

// waitFor polls cond until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	waitfor.Within(t, d, what, cond)
}

// next returns the feed's next event that ok admits, failing after d.
func next(t *testing.T, f deck.Feed, d time.Duration, what string, ok func(deck.Event) bool) deck.Event {
	t.Helper()
	d = waitfor.Scale(d)
	timeout := time.After(d)
	for {
		select {
		case ev, open := <-f.Events():
			if !open {
				t.Fatalf("feed ended (%v) before %s", f.Err(), what)
			}
			if ok(ev) {
				return ev
			}
		case <-timeout:
			t.Fatalf("after %v: no %s", d, what)
		}
	}
}

// about admits an event that carries task id in status st ("" any).
func about(id string, kinds ...deck.EventKind) func(deck.Event) bool {
	return func(ev deck.Event) bool {
		kindOK := len(kinds) == 0
		for _, k := range kinds {
			kindOK = kindOK || ev.Kind == k
		}
		if !kindOK {
			return false
		}
		for _, en := range ev.Entries {
			if en.Task.ID == id {
				return true
			}
		}
		return false
	}
}

func gets(srv *hostile.Server) int { return len(srv.Requests("tasks/get")) }

var confirmYes = map[string]json.RawMessage{"confirm": json.RawMessage(`{"action":"accept","content":{"confirm":true}}`)}

func kindIs(t *testing.T, err error, want deck.Kind) *deck.Error {
	t.Helper()
	de, ok := err.(*deck.Error)
	if !ok {
		t.Fatalf("error %T %v, want a *deck.Error of kind %s", err, err, want)
	}
	if de.Kind != want {
		t.Fatalf("kind %s (%v), want %s", de.Kind, err, want)
	}
	return de
}
