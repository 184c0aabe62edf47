package engine

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/internal/pgtest"
	"github.com/taskdeck/taskdeck/internal/waitfor"
	"github.com/taskdeck/taskdeck/store"
	"github.com/taskdeck/taskdeck/store/postgres"
)

// One request that fails on its connection marks the database lost; the
// next claim round, which asks the database, finds it up again and the
// polls resume, though no write and no listener reconnect says so.
func TestFleetOneLostRequestDoesNotStopPolling(t *testing.T) {
	srv := startDemo(t, demo.Options{Speed: 1, PollInterval: 50 * time.Millisecond, NoPush: true})
	polls := srv.RecordPolls("tasks/get", 0)
	e := open(t, t.TempDir(), srv, Options{Store: pgtest.DB(t), Claim: true, ClaimRenew: testRenew})
	if err := e.PollNow(ctxT(t), nil); err != nil {
		t.Fatal(err)
	}
	res, err := e.Call(ctxT(t), deck.CallRequest{Server: demoRef, Tool: "sleep", Args: json.RawMessage(`{"seconds":20}`)})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the task polled", func() bool { return len(polls.Of(res.Task.TaskID)) > 0 })
	// A connection error of the store's own, as a request on a pooled
	// connection that died gives.
	ctx, cancel := context.WithTimeout(context.Background(), waitfor.Scale(2*time.Second))
	defer cancel()
	_, lostErr := postgres.Open(ctx, "postgres://u:secret@127.0.0.1:1/x?connect_timeout=1", slog.Default())
	if !store.Unreachable(lostErr) {
		t.Fatalf("not a lost database: %v", lostErr)
	}
	e.health.Note(lostErr)
	at := time.Now()
	waitFor(t, 8*time.Second, "a poll after the one failed request", func() bool {
		ps := polls.Of(res.Task.TaskID)
		return ps[len(ps)-1].At.After(at)
	})
}

// While the database is down, the claim rounds keep their pace: the
// lease of another engine that runs out in the last view read must not
// have them run every 50 ms.
func TestFleetRoundsKeepTheirPaceWhileDown(t *testing.T) {
	srv := startDemo(t, demo.Options{Speed: 1, PollInterval: 50 * time.Millisecond, NoPush: true})
	db := pgtest.DB(t)
	a := open(t, t.TempDir(), srv, Options{Store: db, Claim: true, ClaimLease: testLease, ClaimRenew: testRenew})
	b := open(t, t.TempDir(), srv, Options{Store: db, Claim: true, ClaimLease: testLease, ClaimRenew: testRenew})
	if err := b.PollNow(ctxT(t), nil); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		if _, err := b.Call(ctxT(t), deck.CallRequest{Server: demoRef, Tool: "sleep", Args: json.RawMessage(`{"seconds":60}`)}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 10*time.Second, "b claims its tasks", func() bool {
		return len(b.claims.View().Held) == 4
	})
	if err := a.PollNow(ctxT(t), nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "a sees b's leases", func() bool {
		return !a.claims.View().NextExpiry.IsZero()
	})
	pgtest.Stop(t)
	t.Cleanup(func() { pgtest.Start(t) })
	stopped := time.Now()
	waitFor(t, 10*time.Second, "a claim round of a's to fail", func() bool {
		v := a.claims.View()
		return v.TriedAt.After(stopped) && v.ReadAt.Before(stopped)
	})
	// Past every lease a saw: the next round is a renewal away, not at once.
	if d := a.claims.Next(time.Now().Add(testLease + time.Second)); d < testRenew {
		t.Errorf("with the database down the next claim round is %v away, want the renewal's %v", d, testRenew)
	}
}
