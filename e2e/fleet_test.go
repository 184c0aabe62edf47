package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/internal/waitfor"

	"github.com/jackc/pgx/v5"

	tdeck "github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/engine"
	"github.com/taskdeck/taskdeck/internal/hostile"
	"github.com/taskdeck/taskdeck/internal/pgtest"
	mcpconfig "github.com/taskdeck/taskdeck/mcpclient/config"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store/postgres"
)

// TestFleetThreeProcesses: three `taskdeck serve` processes on one
// PostgreSQL database share 3,000 open tasks of one server; one is
// SIGKILLed mid-run and the others poll its tasks again within 10 s (the
// lease, 7 s, renewed every 2 s, and a margin); every task completes, none is lost, and no
// two processes poll one task at the same moment (counted by the server).
func TestFleetThreeProcesses(t *testing.T) {
	n := 3000
	if testing.Short() || raceEnabled {
		n = 600
	}
	db := pgtest.DB(t)
	// 3,000 tasks polled every 10 s are 300 polls a second, within what
	// two shared cores give three engines and the server (about 600): at
	// a 3 s interval every engine is behind for good, and a takeover waits
	// for the machine, not for the lease.
	srv := hostile.Start(t, demo.Options{Speed: 1, PollInterval: 10 * time.Second, NoPush: true})
	polls := srv.RecordPolls("tasks/get", time.Millisecond)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	st, err := postgres.Open(ctx, db, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cfg, err := mcpconfig.ParseConfig("seed.json", fmt.Appendf(nil, `{"mcpServers":{"demo":{"url":%q}}}`, srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	// The calls go through an engine that watches (no Claim), as `taskdeck
	// call` against the fleet's store does; the records are read from st.
	caller, err := engine.Open(engine.Options{Store: db, Config: cfg, RequestTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer caller.Close()

	// The engines first, so that each claims its share as the tasks come.
	var engines []*proc
	for i := range 3 {
		d := newDeck(t)
		d.writeConfig(fmt.Sprintf(`{"store":%q,"mcpServers":{"demo":{"url":%q}}}`, db, fmt.Sprintf("%s?engine=%d", srv.URL, i)))
		engines = append(engines, d.start("serve"))
	}
	for _, p := range engines {
		fleetWait(t, 20*time.Second, "an engine to start", func() bool { return p.exited() || len(p.Stderr.String()) > 0 })
		if p.exited() {
			t.Fatalf("serve exited %d: %s", p.Code, p.Stderr)
		}
	}

	// Tasks of 30–40 s, launched 32 at a time.
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for range 32 {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				if _, err := caller.Call(ctx, tdeck.CallRequest{Server: model.ServerRef{Name: "demo"}, Tool: "sleep",
					Args: json.RawMessage(fmt.Sprintf(`{"seconds":%d}`, 30+i%10))}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	conn, err := pgx.Connect(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	victim := engines[0]
	mine := fmt.Sprintf("%%/%d/%%", victim.cmd.Process.Pid)
	var held []string
	fleetWait(t, 20*time.Second, "the first engine holds claims", func() bool {
		rows, err := conn.Query(ctx, `SELECT id FROM taskdeck_tasks WHERE owner LIKE $1 AND lease_until > now()`, mine)
		if err != nil {
			t.Fatal(err)
		}
		held, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err == nil && len(held) > 0
	})
	var leftMs float64 // of the victim's last lease to run out, at its death
	if err := conn.QueryRow(ctx, `SELECT extract(epoch FROM max(lease_until) - now())::float8 * 1000 FROM taskdeck_tasks WHERE owner LIKE $1`, mine).Scan(&leftMs); err != nil {
		t.Fatal(err)
	}
	leaseLeft := time.Duration(leftMs * float64(time.Millisecond))
	victim.kill()
	died := time.Now()

	// The survivors' rounds wake when the killed engine's leases run out:
	// its tasks are polled again within the lease of its last renewal,
	// plus 3 s for the first polls of three processes on two loaded cores
	// (10 s in all on a quiet machine). Only the margin is the machine's,
	// so only the margin scales.
	lease := engine.DefaultClaimLease + waitfor.Scale(3*time.Second)
	var worst time.Duration
	var took []time.Duration
	for _, id := range held {
		rec, err := st.Get(id)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Status.Terminal() {
			continue
		}
		fleetWait(t, lease+10*time.Second, "task "+id+" polled again after its engine was killed", func() bool {
			ps := polls.Of(rec.TaskID)
			return len(ps) > 0 && ps[len(ps)-1].At.After(died)
		})
		for _, p := range polls.Of(rec.TaskID) {
			if p.At.After(died) {
				worst = max(worst, p.At.Sub(died))
				took = append(took, p.At.Sub(died))
				break
			}
		}
	}
	if worst > lease {
		t.Errorf("the killed engine's tasks were polled again after up to %v, want within %v", worst, lease)
	}
	fleetWait(t, 3*time.Minute, fmt.Sprintf("all %d tasks completed", n), func() bool {
		c, err := st.Counts()
		return err == nil && c[model.StatusCompleted] == n
	})
	all, err := st.All()
	if err != nil || len(all) != n {
		t.Fatalf("%d records (%v), want %d", len(all), err, n)
	}
	if o := polls.Overlap(); o > 1 {
		t.Errorf("%d polls of one task were in flight at once: two engines polled it at the same moment", o)
	}
	perEngine := map[string]int{}
	for _, rec := range all {
		for _, p := range polls.Of(rec.TaskID) {
			perEngine[p.From]++
		}
	}
	slices.Sort(took)
	var median time.Duration
	if len(took) > 0 {
		median = took[len(took)/2]
	}
	t.Logf("%d tasks; %d held by the killed engine, its last lease ran out %v after its death; polled again within %v (median %v); tasks/get per engine %v",
		n, len(held), leaseLeft.Round(time.Millisecond), worst.Round(time.Millisecond), median.Round(time.Millisecond), perEngine)
}

// fleetWait checks cond until it holds or d passes.
func fleetWait(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	waitfor.Within(t, d, what, cond)
}
