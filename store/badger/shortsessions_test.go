package badger_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/store/badger"
)

// TestShortSessionsKeepTablesBounded: every command line is one short
// session that writes a little and closes, and each close flushes the
// memtable into a new table. Nothing compacted them: after ~1,000
// commands Badger held a file per table open and ran out of descriptors
// under `ulimit -n 1024`, and each open had become 13 times slower.
func TestShortSessionsKeepTablesBounded(t *testing.T) {
	t.Parallel()
	sessions := 2000
	if testing.Short() || raceEnabled {
		sessions = 250 // 2,000 take about 160 s under -race
	}
	dir := memDir(t)
	// The first and the last ten, summed: one alone is mostly noise.
	var first, last time.Duration
	most := 0
	for i := range sessions {
		start := time.Now()
		s, err := badger.Open(dir, nil)
		if err != nil {
			t.Fatalf("session %d: %v", i, err)
		}
		took := time.Since(start)
		if i < 10 {
			first += took
		}
		if i >= sessions-10 {
			last += took
		}
		must(t, s.Create(intent("", t0)))
		must(t, s.Close())
		tables, err := filepath.Glob(filepath.Join(dir, "*.sst"))
		must(t, err)
		most = max(most, len(tables))
		if len(tables) > 10 {
			t.Fatalf("after %d short sessions the store has %d table files; they must be compacted", i+1, len(tables))
		}
	}
	s := openStore(t, dir)
	all, err := s.All()
	must(t, err)
	if len(all) != sessions {
		t.Fatalf("%d records after %d sessions", len(all), sessions)
	}
	t.Logf("%d sessions: at most %d table files; the first ten opens took %v, the last ten %v (%.1fx)", sessions, most, first, last, float64(last)/float64(first))
}

// memDir is a temporary directory in memory (/dev/shm) where there is one:
// 2,000 sessions on a shared disk take minutes of fsyncs, and what is
// tested is the number of files, not the disk.
func memDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/dev/shm", "taskdeck-store-")
	if err != nil {
		return t.TempDir()
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}
