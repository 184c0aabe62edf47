package e2e

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/taskdeck/taskdeck/engine"
	"github.com/taskdeck/taskdeck/internal/pgtest"
)

// TestFleetDashboardClaimsNothing (issue 25 item 13): on a fleet of three
// `taskdeck serve` on one PostgreSQL database, a dashboard, at 80×24 and
// at 200×60, claims none of the tasks called while it runs (the serves
// hold them all), and quitting it moves no claim.
func TestFleetDashboardClaimsNothing(t *testing.T) {
	db := pgtest.DB(t)
	srv := startDemo(t, "127.0.0.1:0")
	config := fmt.Sprintf(`{"store":%q,"mcpServers":{"demo":{"url":%q}}}`, db, srv.url)
	serves := map[string]bool{} // the serves' pids, as claim owners name them
	for range 3 {
		d := newDeck(t)
		d.writeConfig(config)
		p := d.start("serve")
		fleetWait(t, 20*time.Second, "serve to start", func() bool { return p.exited() || len(p.Stderr.String()) > 0 })
		if p.exited() {
			t.Fatalf("serve exited %d: %s", p.Code, p.Stderr)
		}
		serves[strconv.Itoa(p.cmd.Process.Pid)] = true
	}
	conn, err := pgx.Connect(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	// owners reads who holds a live claim on each task.
	owners := func() map[string]string {
		rows, err := conn.Query(context.Background(), `SELECT id, owner FROM taskdeck_tasks WHERE owner IS NOT NULL AND lease_until >= now()`)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		var id, owner string
		if _, err := pgx.ForEachRow(rows, []any{&id, &owner}, func() error { out[id] = owner; return nil }); err != nil {
			t.Fatal(err)
		}
		return out
	}

	calls := 0
	for _, size := range [][2]int{{80, 24}, {200, 60}} {
		d := newDeck(t)
		d.writeConfig(config)
		tm := d.dashboard(size[0], size[1])
		tm.waitText("SERVER")
		// Calls made while it runs: a member of the fleet would claim its
		// share of them. 3600 demo seconds (3 min here) stay open all along.
		for range 10 {
			d.call("sleep", `{"seconds":3600}`)
			calls++
		}
		var held map[string]string
		fleetWait(t, 30*time.Second, "every task claimed", func() bool {
			held = owners()
			return len(held) == calls
		})
		for id, owner := range held {
			if pid := strings.Split(owner, "/")[1]; !serves[pid] {
				t.Errorf("%d×%d: task %s is held by %s, not by a serve (pids %v)", size[0], size[1], id, owner, serves)
			}
		}
		tm.quit()
		// Once every lease was renewed after the dashboard quit, each task
		// is held by the serve that held it.
		quit := time.Now()
		fleetWait(t, 30*time.Second, "every lease renewed after the dashboard quit", func() bool {
			var renewed bool
			err := conn.QueryRow(context.Background(), `SELECT bool_and(lease_until - $1::interval > $2) FROM taskdeck_tasks WHERE owner IS NOT NULL`,
				engine.DefaultClaimLease, quit).Scan(&renewed)
			return err == nil && renewed
		})
		if after := owners(); !maps.Equal(held, after) {
			t.Errorf("%d×%d: quitting the dashboard moved claims:\nbefore %v\nafter  %v", size[0], size[1], held, after)
		}
	}
	t.Logf("%d tasks called beside two dashboards, all held by the three serves throughout", calls)
}
