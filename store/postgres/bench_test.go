package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/taskdeck/taskdeck/internal/pgtest"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store"
	"github.com/taskdeck/taskdeck/store/postgres"
	"github.com/taskdeck/taskdeck/store/storetest"
)

// benchStore is a store on a new database with a commit hook, as an
// engine has, and a scratch table of the records' shape (columns and
// indexes) for the bare inserts; conns sizes its pool.
func benchStore(b *testing.B, conns int) (*postgres.Store, *pgxpool.Pool) {
	b.Helper()
	s, err := postgres.Open(context.Background(), fmt.Sprintf("%s&pool_max_conns=%d", pgtest.DB(b), conns), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	s.SetCommitHook(func([]store.Change) {})
	pool := postgres.Pool(s)
	if _, err := pool.Exec(context.Background(), `CREATE TABLE bare (LIKE taskdeck_tasks INCLUDING ALL)`); err != nil {
		b.Fatal(err)
	}
	return s, pool
}

// bareInsert is one single-row INSERT committed on its own (synchronous
// commit on) of a row as large as rec's.
func bareInsert(pool *pgxpool.Pool, rec *model.Task, rev int64) error {
	body, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	_, err = pool.Exec(context.Background(), `INSERT INTO bare (id, idem_key, status, revision, updated_at, body, server)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`, rec.ID, rec.IdempotencyKey, string(rec.Status), rev, rec.UpdatedAt, body, rec.Server.Name)
	return err
}

// keyed is a new intent with an idempotency key, as an agent's call has.
func keyed(i int) *model.Task {
	return storetest.Intent(fmt.Sprintf("key-%d-%d", time.Now().UnixNano(), i), storetest.T0)
}

// spread is the median of xs and its range.
func spread(xs []float64) (median, lo, hi float64) {
	s := slices.Sorted(slices.Values(xs))
	return s[len(s)/2], s[0], s[len(s)-1]
}

// BenchmarkWriteVsBare: each round (one iteration) makes ops synced
// Creates, ops changed Updates and ops bare single-row INSERT … COMMITs of
// rows of the same shape and size on the same database, one at a time and
// interleaved op by op (create, update, bare, in an order that turns), so
// that each kind meets the same load. Per round it takes each kind's
// median time per op and each durable write's ratio to the bare insert;
// it reports the medians of those over rounds, with ranges in the log.
//
//	go test -run '^$' -bench WriteVsBare -benchtime 9x ./store/postgres
func BenchmarkWriteVsBare(b *testing.B) {
	const ops = 100
	s, pool := benchStore(b, 4)
	ids := make([]string, ops)
	for i := range ids {
		rec := keyed(i)
		if err := s.Create(rec); err != nil {
			b.Fatal(err)
		}
		ids[i] = rec.ID
	}
	var n, step int64
	kinds := []struct {
		name string
		op   func(i int) error
	}{
		{"create", func(i int) error { return s.Create(keyed(i)) }},
		{"update", func(i int) error {
			step++
			_, err := s.Update(ids[i], func(t *model.Task) (bool, error) {
				t.StatusMessage = fmt.Sprint("step ", step)
				return true, nil
			})
			return err
		}},
		{"bare", func(i int) error { n++; return bareInsert(pool, keyed(i), n) }},
	}
	per := map[string][]float64{} // each round's median µs an op, by kind
	var rounds int
	for b.Loop() {
		took := map[string][]float64{}
		for i := range ops {
			for k := range kinds {
				kind := kinds[(k+i+rounds)%len(kinds)]
				start := time.Now()
				if err := kind.op(i); err != nil {
					b.Fatal(err)
				}
				took[kind.name] = append(took[kind.name], float64(time.Since(start).Microseconds()))
			}
		}
		for name, ds := range took {
			m, _, _ := spread(ds)
			per[name] = append(per[name], m)
		}
		rounds++
	}
	for _, name := range []string{"create", "update", "bare"} {
		m, lo, hi := spread(per[name])
		b.ReportMetric(m, name+"-µs")
		b.Logf("%s: median %.0f µs an op (the rounds' medians %.0f–%.0f µs), %d rounds", name, m, lo, hi, rounds)
	}
	for _, name := range []string{"create", "update"} {
		ratios := make([]float64, rounds)
		for r := range ratios {
			ratios[r] = per[name][r] / per["bare"][r]
		}
		m, lo, hi := spread(ratios)
		b.ReportMetric(m, name+"/bare")
		b.Logf("%s/bare: median %.2f×, range %.2f–%.2f×", name, m, lo, hi)
	}
}

// BenchmarkWriters64: each round (one iteration) 64 goroutines create
// each records through one store, and 64 goroutines insert as many bare
// rows, each phase timed on its own, the order turning each round; both
// share one pool of 64 connections. It reports the medians over rounds of
// writes per second and of the store's rate over the bare one.
//
//	go test -run '^$' -bench Writers64 -benchtime 15x ./store/postgres
func BenchmarkWriters64(b *testing.B) { writersVsBare(b, 64, 10) }

// BenchmarkWriters4 is BenchmarkWriters64 with 4 writers of 50 records
// each: the store's commits are small batches (and lone writes).
//
//	go test -run '^$' -bench Writers4 -benchtime 15x ./store/postgres
func BenchmarkWriters4(b *testing.B) { writersVsBare(b, 4, 50) }

func writersVsBare(b *testing.B, writers, each int) {
	s, pool := benchStore(b, writers)
	var mu sync.Mutex
	var n int64
	phases := []struct {
		name string
		op   func(i int) error
	}{
		{"store", func(i int) error { return s.Create(keyed(i)) }},
		{"bare", func(i int) error {
			mu.Lock()
			n++
			rev := n
			mu.Unlock()
			return bareInsert(pool, keyed(i), rev)
		}},
	}
	rate := map[string][]float64{}
	var rounds int
	for b.Loop() {
		for p := range phases {
			phase := phases[(p+rounds)%len(phases)]
			start := time.Now()
			var wg sync.WaitGroup
			for w := range writers {
				wg.Go(func() {
					for i := range each {
						if err := phase.op(w*each + i); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			rate[phase.name] = append(rate[phase.name], float64(writers*each)/time.Since(start).Seconds())
		}
		rounds++
	}
	for _, name := range []string{"store", "bare"} {
		m, lo, hi := spread(rate[name])
		b.ReportMetric(m, name+"-writes/s")
		b.Logf("%s: median %.0f writes/s, range %.0f–%.0f, %d rounds", name, m, lo, hi, rounds)
	}
	ratios := make([]float64, rounds)
	for r := range ratios {
		ratios[r] = rate["store"][r] / rate["bare"][r]
	}
	m, lo, hi := spread(ratios)
	b.ReportMetric(m, "store/bare")
	b.Logf("store/bare: median %.2f×, range %.2f–%.2f×", m, lo, hi)
}

// BenchmarkOpenMigrate is an Open of a new database: connect, migrate
// under the advisory lock, start listening.
func BenchmarkOpenMigrate(b *testing.B) {
	for b.Loop() {
		b.StopTimer()
		conn := pgtest.DB(b)
		b.StartTimer()
		s, err := postgres.Open(context.Background(), conn, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		_ = s.Close()
		b.StartTimer()
	}
}
