package service

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/engine"
	"github.com/taskdeck/taskdeck/internal/pgtest"
	mcpconfig "github.com/taskdeck/taskdeck/mcpclient/config"
	_ "github.com/taskdeck/taskdeck/store/postgres" // engine.Open of a postgres:// store
)

// One TestMain for the package: the outage tests need a real PostgreSQL.
func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// TestStoreLostCrossesTheSocket: an owner on PostgreSQL loses its
// database. Over the socket a watcher hears it (a watcher that comes
// meanwhile, first), a call fails with its kind and one line, and the
// return is heard too.
func TestStoreLostCrossesTheSocket(t *testing.T) {
	mcp := startDemo(t)
	cfg, err := mcpconfig.ParseConfig("test.json", fmt.Appendf(nil, `{"mcpServers":{"demo":{"url":%q}}}`, mcp.URL))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	e, err := engine.Open(engine.Options{DataDir: dir, Store: pgtest.DB(t), Config: cfg, RequestTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := Serve(t.Context(), dir, e, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		srv.Shutdown(t.Context())
		e.Close()
	})
	r, err := Dial(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	feed, err := r.Watch(t.Context(), 0)
	if err != nil {
		t.Fatal(err)
	}
	nextOf(t, feed, deck.EventSnapshot)

	pgtest.Stop(t)
	lost := nextOf(t, feed, deck.EventStore)
	if lost.Store.Up || lost.Store.Error == "" || lost.Store.Since.IsZero() {
		t.Errorf("over the socket the loss reads %+v", *lost.Store)
	}
	late, err := r.Watch(t.Context(), 0)
	if err != nil {
		t.Fatalf("a watch over the socket while the database is down: %v", err)
	}
	if ev := nextOf(t, late, deck.EventStore, deck.EventSnapshot); ev.Kind != deck.EventStore || ev.Store.Up {
		t.Errorf("a watcher that came while the database was down first heard %s", ev.Kind)
	}
	_, err = r.Call(t.Context(), sleepCall(""))
	if deck.KindOf(err) != deck.KindStoreDown || !strings.Contains(err.Error(), "nothing was recorded") || strings.Contains(err.Error(), "\n") {
		t.Errorf("a call over the socket while the database is down: %s %v", deck.KindOf(err), err)
	}

	pgtest.Start(t)
	for _, f := range []deck.Feed{feed, late} {
		if ev := nextOf(t, f, deck.EventStore); !ev.Store.Up {
			t.Errorf("over the socket the return reads %+v", *ev.Store)
		}
	}
	nextOf(t, late, deck.EventSnapshot)
}
