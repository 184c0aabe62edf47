package postgres

import (
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Pool is the store's pool, for tests that look at the database.
func Pool(s *Store) *pgxpool.Pool { return s.pool }

// GetSQL is the statement Get runs.
const GetSQL = cols + byID

// SetMaxTombstones keeps only the last n revisions' tombstones for the
// rest of the test.
func SetMaxTombstones(t *testing.T, n uint64) {
	old := maxTombstones
	maxTombstones = n
	t.Cleanup(func() { maxTombstones = old })
}
