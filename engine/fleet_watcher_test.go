package engine

import (
	"encoding/json"
	"maps"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/internal/pgtest"
	"github.com/taskdeck/taskdeck/model"
)

// claimsIn reads who holds a live claim on each task, as the database
// says.
func claimsIn(t *testing.T, db string) map[string]string {
	t.Helper()
	conn, err := pgx.Connect(ctxT(t), db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctxT(t))
	rows, err := conn.Query(ctxT(t), `SELECT id, owner FROM taskdeck_tasks WHERE owner IS NOT NULL AND lease_until >= now()`)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	var id, held string
	if _, err := pgx.ForEachRow(rows, []any{&id, &held}, func() error { out[id] = held; return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

// viewRound waits for the next time e reads the fleet: its rounds run.
func viewRound(t *testing.T, e *Engine) {
	t.Helper()
	from := e.claims.View().ReadAt
	waitFor(t, 10*time.Second, "the watcher's next view of the fleet", func() bool {
		return e.claims.View().ReadAt.After(from)
	})
}

// TestFleetWatcherClaimsNothing (issue 25 item 13): an engine opened
// without Claim (a dashboard, a command, a Go program) on a fleet of three
// members watches the tasks, and its own call's, and names their
// watchers, but claims none; closing it moves no claim.
func TestFleetWatcherClaimsNothing(t *testing.T) {
	srv := startDemo(t, demo.Options{Speed: 1, PollInterval: 50 * time.Millisecond, NoPush: true})
	// The default lease: a short one could run out under -race on a busy
	// machine, and move a claim while no engine closed.
	db, es := openFleet(t, srv, 3, DefaultClaimLease, DefaultClaimRenew)
	w := open(t, t.TempDir(), srv, Options{Store: db, Config: fleetCfg(t, srv, 9)})
	if _, err := w.Watch(ctxT(t), 0); err != nil {
		t.Fatal(err)
	}
	viewRound(t, w) // it sees the members
	// The watcher makes the calls: a member would claim its share of them.
	const n = 30
	tasks := launchAll(t, []*Engine{w}, n, 600)
	waitFor(t, 20*time.Second, "every task claimed", func() bool { return len(claimsIn(t, db)) == n })
	// The watcher names the member that watches each.
	waitFor(t, 20*time.Second, "the watcher names a member watching its call", func() bool {
		en, err := w.Get(ctxT(t), tasks[0].ID)
		return err == nil && en.Poll.Watcher != "" && en.Poll.Watcher != w.claims.Name()
	})
	for range 3 { // rounds in which a member would have claimed its share
		viewRound(t, w)
	}
	before := claimsIn(t, db)
	for id, owner := range before {
		if owner == w.claims.Name() {
			t.Errorf("the watcher claimed task %s", id)
		}
	}
	w.Close()
	// Two of the members' rounds after the watcher closed, every task is
	// held by the member that held it.
	viewRound(t, es[0])
	viewRound(t, es[0])
	if after := claimsIn(t, db); !maps.Equal(before, after) {
		t.Errorf("closing the watcher moved claims:\nbefore %v\nafter  %v", before, after)
	}
}

// TestFleetLoneWatcherPollsItsCall: with no member on the database, a
// watcher claims the tasks of its servers (else nothing would poll them)
// and follows its call to the end, as one host's command does.
func TestFleetLoneWatcherPollsItsCall(t *testing.T) {
	srv := startDemo(t, demo.Options{Speed: 1, PollInterval: 50 * time.Millisecond, NoPush: true})
	w := open(t, t.TempDir(), srv, Options{Store: pgtest.DB(t), ClaimLease: testLease, ClaimRenew: testRenew})
	feed, err := w.Watch(ctxT(t), 0)
	if err != nil {
		t.Fatal(err)
	}
	res, err := w.Call(ctxT(t), deck.CallRequest{Server: demoRef, Tool: "sleep", Args: json.RawMessage(`{"seconds":0.2}`)})
	if err != nil {
		t.Fatal(err)
	}
	next(t, feed, 20*time.Second, "the call completed", func(ev deck.Event) bool {
		for _, en := range ev.Entries {
			if en.Task.ID == res.Task.ID && en.Task.Status == model.StatusCompleted {
				return true
			}
		}
		return false
	})
}
