package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/internal/pgtest"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store/postgres"
	"github.com/taskdeck/taskdeck/store/storetest"
)

// The proxy's lookup of an agent's task id on a fleet is Get: among
// 100,000 records the plan reads the primary key's index for the one
// row, never the whole table (issue 21: no scan). 1,000,000 passed too,
// in 95 s on the shared test machine: too long to run each time.
func TestGetIsAnIndexLookup(t *testing.T) {
	const n = 100000
	conn := pgtest.DB(t)
	s := open(t, conn)
	rec := model.NewIntent(model.ServerRef{Name: "demo"}, "sleep", json.RawMessage(`{}`), "", time.Now())
	storetest.Must(t, s.Create(rec))
	// The others behind the store's back, in one statement (a million
	// commits would take an hour): ids as the store's sort, the same body.
	exec(t, conn, fmt.Sprintf(`INSERT INTO taskdeck_tasks (id, status, revision, updated_at, body, server)
		SELECT 'x' || lpad(g::text, 9, '0'), status, revision, updated_at, body, server
		FROM taskdeck_tasks, generate_series(1, %d) g; ANALYZE taskdeck_tasks`, n-1))
	ctx := context.Background()
	pool := postgres.Pool(s)
	var count int
	storetest.Must(t, pool.QueryRow(ctx, `SELECT count(*) FROM taskdeck_tasks`).Scan(&count))
	if count != n {
		t.Fatalf("%d records, want %d", count, n)
	}
	rows, err := pool.Query(ctx, `EXPLAIN `+postgres.GetSQL, rec.ID)
	storetest.Must(t, err)
	var plan []string
	for rows.Next() {
		var line string
		storetest.Must(t, rows.Scan(&line))
		plan = append(plan, line)
	}
	storetest.Must(t, rows.Err())
	if p := strings.Join(plan, "\n"); !strings.Contains(p, "Index Scan using taskdeck_tasks_pkey") || strings.Contains(p, "Seq Scan") {
		t.Fatalf("Get's plan at %d records is not a lookup of the primary key:\n%s", n, p)
	}
	got, err := s.Get(rec.ID)
	storetest.Must(t, err)
	if got.ID != rec.ID {
		t.Fatalf("Get(%s) = %s", rec.ID, got.ID)
	}
}
