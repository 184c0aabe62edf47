package postgres_test

import (
	"context"
	"sync"
	"testing"

	"github.com/taskdeck/taskdeck/internal/pgtest"
	"github.com/taskdeck/taskdeck/store"
	"github.com/taskdeck/taskdeck/store/postgres"
	"github.com/taskdeck/taskdeck/store/storetest"
)

// Run interleaved, e.g. for i in 1 2 3 4 5; do go test -run '^$' -bench . ./store/postgres; done,
// and take the medians.

func benchCreate(b *testing.B, s store.Backend) {
	for b.Loop() {
		if err := s.Create(storetest.Intent("", storetest.T0)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCreate is one synced Create at a time.
func BenchmarkCreate(b *testing.B) {
	b.Run("badger", func(b *testing.B) {
		s, err := store.Open(b.TempDir(), nil)
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		benchCreate(b, s)
	})
	b.Run("postgres", func(b *testing.B) {
		s, err := postgres.Open(context.Background(), pgtest.DB(b), nil)
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		benchCreate(b, s)
	})
	// The floor: one single-row INSERT, committed with synchronous_commit
	// on, on a table of the same shape.
	b.Run("bare-insert", func(b *testing.B) {
		s, err := postgres.Open(context.Background(), pgtest.DB(b), nil)
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		pool := postgres.Pool(s)
		ctx := context.Background()
		if _, err := pool.Exec(ctx, `CREATE TABLE bare (id text PRIMARY KEY, body bytea)`); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			rec := storetest.Intent("", storetest.T0)
			if _, err := pool.Exec(ctx, `INSERT INTO bare VALUES ($1, $2)`, rec.ID, []byte(rec.Tool)); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkCreate8 is eight writers creating at once on PostgreSQL; ns/op
// is per Create, so writes/s = 1e9 / ns/op.
func BenchmarkCreate8(b *testing.B) {
	s, err := postgres.Open(context.Background(), pgtest.DB(b), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	work := make(chan struct{})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range work {
				if err := s.Create(storetest.Intent("", storetest.T0)); err != nil {
					b.Error(err)
				}
			}
		})
	}
	for b.Loop() {
		work <- struct{}{}
	}
	close(work)
	wg.Wait()
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
