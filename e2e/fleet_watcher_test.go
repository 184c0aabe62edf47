package e2e

import (
	"context"
	"fmt"
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
		// Quitting it moves no claim. A serve may still take a task over
		// whose lease ran out (a busy machine delays a renewal), so the
		// claims are sampled until every lease was renewed after the quit:
		// a task whose owner changed before its last seen lease ran out
		// was let go, which only a bug does.
		claims := sampleClaims(t, conn)
		tm.quit()
		quit := time.Now()
		fleetWait(t, 30*time.Second, "every lease renewed after the dashboard quit", func() bool {
			now := sampleClaims(t, conn)
			for id, was := range claims.held {
				is, ok := now.held[id]
				switch {
				case ok && is.owner == was.owner:
				case ok && is.owner != was.owner && now.at.After(was.until):
					if pid := strings.Split(is.owner, "/")[1]; !serves[pid] {
						t.Errorf("%d×%d: task %s taken over by %s, not by a serve", size[0], size[1], id, is.owner)
					}
				default:
					t.Errorf("%d×%d: quitting the dashboard let task %s go: held by %s until %s, at %s held by %q",
						size[0], size[1], id, was.owner, was.until.Format(time.StampMilli), now.at.Format(time.StampMilli), is.owner)
				}
			}
			claims = now
			var renewed bool
			err := conn.QueryRow(context.Background(), `SELECT bool_and(lease_until - $1::interval > $2) FROM taskdeck_tasks WHERE owner IS NOT NULL`,
				engine.DefaultClaimLease, quit).Scan(&renewed)
			return t.Failed() || err == nil && renewed
		})
	}
	t.Logf("%d tasks called beside two dashboards, all held by the three serves throughout", calls)
}

// claim is who holds a task, until when.
type claim struct {
	owner string
	until time.Time
}

// claimSample is who held each claimed task, read before the database's
// time at.
type claimSample struct {
	at   time.Time
	held map[string]claim
}

func sampleClaims(t *testing.T, conn *pgx.Conn) claimSample {
	t.Helper()
	s := claimSample{held: map[string]claim{}}
	rows, err := conn.Query(context.Background(), `SELECT id, owner, lease_until FROM taskdeck_tasks WHERE owner IS NOT NULL`)
	if err != nil {
		t.Fatal(err)
	}
	var id string
	var c claim
	if _, err := pgx.ForEachRow(rows, []any{&id, &c.owner, &c.until}, func() error { s.held[id] = c; return nil }); err != nil {
		t.Fatal(err)
	}
	// Read after the rows: a takeover seen in them happened before at.
	if err := conn.QueryRow(context.Background(), `SELECT clock_timestamp()`).Scan(&s.at); err != nil {
		t.Fatal(err)
	}
	return s
}
