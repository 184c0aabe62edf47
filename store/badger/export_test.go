package badger

import (
	"encoding/json"
	"log/slog"
	"math"
	"path/filepath"
	"testing"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/table"

	"github.com/taskdeck/taskdeck/model"
)

// Writes is the number of write txns the store has committed.
func Writes(s *Store) int64 { return s.writes.Load() }

// MaxVersion is Badger's latest commit timestamp; every committed write
// txn advances it.
func MaxVersion(s *Store) uint64 { return s.db.MaxVersion() }

// PutRaw writes one key behind the store's back, to plant damage.
func PutRaw(s *Store, key, val string) error {
	defer forgetAll(s)
	return s.db.Update(func(txn *badger.Txn) error { return txn.Set([]byte(key), []byte(val)) })
}

// forgetAll empties Get's recent records after a write behind the store's
// back, which no commit reports, so that Get reads what it wrote.
func forgetAll(s *Store) {
	r := &s.recent
	r.mu.Lock()
	defer r.mu.Unlock()
	r.gen++
	r.tasks, r.ring, r.bytes = nil, nil, 0
}

// WriteArgsInline makes the stores of this process write every record's
// arguments inline, as schema 2 did, until the returned func is called.
func WriteArgsInline() (restore func()) {
	old := argsApartMin
	argsApartMin = math.MaxInt
	return func() { argsApartMin = old }
}

// Keys lists every key in the store, in order.
func Keys(s *Store) ([]string, error) {
	var keys []string
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			keys = append(keys, string(it.Item().Key()))
		}
		return nil
	})
	return keys, err
}

// BadgerLogger is the adapter Open hands to Badger.
func BadgerLogger(l *slog.Logger) badger.Logger { return badgerLogger{l} }

// SyncedWAL names the file the store syncs after each commit, "" when it
// falls back to Badger's db.Sync.
func SyncedWAL(s *Store) string {
	if s.wal == nil || s.wal.f == nil {
		return ""
	}
	return s.wal.f.Name()
}

// Raw reads one key behind the store's back.
func Raw(s *Store, key string) (string, error) {
	var v []byte
	err := s.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get([]byte(key))
		if err == nil {
			v, err = item.ValueCopy(nil)
		}
		return err
	})
	return string(v), err
}

// KeyVersion is the commit timestamp of key's last write.
func KeyVersion(s *Store, key string) (uint64, error) {
	var v uint64
	err := s.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get([]byte(key))
		if err == nil {
			v = item.Version()
		}
		return err
	})
	return v, err
}

// OnCompact makes s call fn before each step of a reclaim's compaction.
func OnCompact(s *Store, fn func(step string)) { s.onCompact = fn }

// OnSync makes s call fn with every path it syncs after a commit.
func OnSync(s *Store, fn func(path string)) { s.wal.onSync = fn }

// OnDBSync makes s call fn before each db.Sync after a commit (the value
// log's sync, beside the WAL's).
func OnDBSync(s *Store, fn func()) { s.onDBSync = fn }

// DeleteRaw deletes one key behind the store's back.
func DeleteRaw(s *Store, key string) error {
	defer forgetAll(s)
	return s.db.Update(func(txn *badger.Txn) error { return txn.Delete([]byte(key)) })
}

// BreakWALSync closes the file the store syncs after each commit, so the
// next syncs fail; RepairWALSync makes the store look it up again.
func BreakWALSync(s *Store) { _ = s.wal.f.Close() }

func RepairWALSync(s *Store) { s.wal.stale = true }

// SetMaxTombstones lowers the number of tombstones kept, for one test.
func SetMaxTombstones(t *testing.T, n uint64) {
	old := maxTombstones
	maxTombstones = n
	t.Cleanup(func() { maxTombstones = old })
}

// Rewrite changes, with Badger's own API on the closed store in dir, the
// value of key by edit: what someone who can write the files can do
// behind taskdeck's back. Badger writes whole, valid tables, which the
// next Open checks block by block and sums like its own.
func Rewrite(dir, key string, edit func([]byte) []byte) error {
	return behindTheBack(dir, func(txn *badger.Txn) error {
		item, err := txn.Get([]byte(key))
		if err != nil {
			return err
		}
		v, err := item.ValueCopy(nil)
		if err != nil {
			return err
		}
		return txn.Set([]byte(key), edit(v))
	})
}

// UnpackAudit is the canonical bytes of a stored audit entry (after its
// hash), as the store reads it.
func UnpackAudit(v []byte) []byte {
	body, err := unpackAudit(v)
	if err != nil {
		panic(err)
	}
	return body
}

// PackAudit is the stored form of an entry's canonical bytes, as the store
// writes it: whoever knows the format can rewrite an entry.
func PackAudit(canon []byte) []byte {
	var b model.AuditBody
	if err := json.Unmarshal(canon, &b); err != nil {
		panic(err)
	}
	return packAudit(b, []byte(b.Seal), canon)
}

// DeleteClosed deletes key as Rewrite changes one.
func DeleteClosed(dir, key string) error {
	return behindTheBack(dir, func(txn *badger.Txn) error { return txn.Delete([]byte(key)) })
}

func behindTheBack(dir string, fn func(*badger.Txn) error) error {
	db, err := badger.Open(options(dir, nil))
	if err != nil {
		return err
	}
	err = db.Update(fn)
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	return err
}

// Tamper runs fn in one Badger txn on the closed store in dir, as Rewrite
// does: for an attacker who rewrites several keys at once.
func Tamper(dir string, fn func(*badger.Txn) error) error { return behindTheBack(dir, fn) }

// before20 is Badger's sizing before issue 20 (8 MiB memtables, values of
// 1 MiB and more in the value log), the baseline of the sizing benchmarks.
var before20 = sizing{memTable: 8 << 20, memtables: 2, level0: 2, table: 2 << 20, threshold: 1 << 20, block: 4 << 10}

// Sizings names the sizings the benchmarks compare; UseSizing makes Open
// take one until the returned func restores the store's own.
var Sizings = []string{"small", "before20"}

func UseSizing(name string) (restore func()) {
	if name == "before20" {
		sized = before20
	} else if c, ok := candidates[name]; ok {
		sized = c
	}
	return func() { sized = small }
}

// candidates are variations of small that BenchmarkSizingParallelCreate
// also measures, each changing one thing.
var candidates = map[string]sizing{
	"memtable2M": func() sizing { s := small; s.memTable = 2 << 20; return s }(),
	// 64 KiB blocks, which keep the pooled table builders smaller
	"blocks64K": func() sizing { s := small; s.block = 64 << 10; return s }(),
	// 4 KiB blocks, Badger's default and the store's before issue 20's
	// flipping task was measured with a heap profile
	"blocks4K": func() sizing { s := small; s.block = 4 << 10; return s }(),
}

// Candidates names them, in a fixed order.
var Candidates = []string{"memtable2M", "blocks64K", "blocks4K"}

// PruneChunk is the records one prune txn deletes at most.
const PruneChunk = pruneChunk

// ForgeSums records a wrong CRC-32C for every table in TABLESUMS, keeping
// each one's stamp: only a check that reads the tables notices.
func ForgeSums(dir string) error {
	sums := readSums(dir)
	for name, s := range sums {
		s.crc ^= 1
		sums[name] = s
	}
	return writeSums(dir, sums)
}

// Level0Tables is how many tables s has in level 0, which one such table
// compacts away in the background (sizing small: level0 is 1).
func Level0Tables(s *Store) int {
	n := 0
	for _, t := range s.db.Tables() {
		if t.Level == 0 {
			n++
		}
	}
	return n
}

// CheckFiles is the check Open makes before Badger opens dir.
func CheckFiles(dir string) error {
	_, err := checkFiles(dir, options(dir, nil))
	return err
}

// WriteEntryKeys makes s write every audit entry under a key of its own,
// as schema 3 did.
func WriteEntryKeys(s *Store) { s.entryKeys = true }

// UseBloomFilters makes Open write tables with bloom filters at Badger's
// default rate, as the store did before issue 23, until the returned
// func restores none.
func UseBloomFilters() (restore func()) {
	bloomFalsePositive = 0.01
	return func() { bloomFalsePositive = 0 }
}

// FilterBytes is the size of the bloom filters of the tables in dir.
func FilterBytes(dir string) (int, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.sst"))
	n := 0
	for _, name := range names {
		if err != nil {
			break
		}
		err = withTable(name, compression, options(dir, nil), func(t *table.Table) error {
			n += t.BloomFilterSize()
			return nil
		})
	}
	return n, err
}
