package badger_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/taskdeck/taskdeck/store"
	"github.com/taskdeck/taskdeck/store/badger"
)

// walWithRecords leaves a store as a crash does, with a record per key in
// its WAL only, and returns its directory, the WAL's path and bytes, and
// the records' ids in order.
func walWithRecords(t *testing.T, keys ...string) (dir, wal string, data []byte, ids []string) {
	t.Helper()
	live := t.TempDir()
	s := openStore(t, live)
	for _, key := range keys {
		ids = append(ids, create(t, s, key, "working", t0).ID)
	}
	wal = badger.SyncedWAL(s)
	dir = t.TempDir()
	entries, err := os.ReadDir(live)
	must(t, err)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(live, e.Name()))
		must(t, err)
		must(t, os.WriteFile(filepath.Join(dir, e.Name()), b, 0o600))
	}
	must(t, s.Close())
	wal = filepath.Join(dir, filepath.Base(wal))
	data, err = os.ReadFile(wal)
	must(t, err)
	return dir, wal, data, ids
}

// A WAL entry that fails its checksum is a write torn by a crash when
// nothing whole follows it: Badger drops it, and so the last commit. With a
// whole commit after it, it is damage, and the store is refused rather
// than opened without the records after it.
func TestWALDamage(t *testing.T) {
	t.Run("torn last commit is dropped", func(t *testing.T) {
		dir, wal, data, ids := walWithRecords(t, "a", "b", "c")
		// The last commit's record is c's: flip a byte of its id.
		at := bytes.LastIndex(data, []byte(ids[2]))
		data[at] ^= 0xff
		must(t, os.WriteFile(wal, data, 0o600))
		s := openStore(t, dir)
		all, err := s.All()
		must(t, err)
		if len(all) != 2 || all[0].ID != ids[0] || all[1].ID != ids[1] {
			t.Fatalf("after a torn last commit: %v, want %v", all, ids[:2])
		}
	})
	t.Run("torn first commit of a WAL is dropped", func(t *testing.T) {
		// A WAL whose first commit is torn (a power loss before any of it
		// was synced) has no valid commit before the break to go by.
		dir, wal, data, ids := walWithRecords(t, "a")
		at := bytes.Index(data, []byte(ids[0]))
		data[at] ^= 0xff
		must(t, os.WriteFile(wal, data, 0o600))
		s := openStore(t, dir)
		all, err := s.All()
		must(t, err)
		if len(all) != 0 {
			t.Fatalf("after the only commit was torn: %v, want no record", all)
		}
	})
	t.Run("damage before the last commit is refused", func(t *testing.T) {
		dir, wal, data, ids := walWithRecords(t, "a", "b", "c")
		at := bytes.Index(data, []byte(ids[0]))
		data[at] ^= 0xff
		must(t, os.WriteFile(wal, data, 0o600))
		_, err := badger.Open(dir, nil)
		var corrupt *store.CorruptError
		if !errors.As(err, &corrupt) {
			t.Fatalf("Open of a WAL damaged before its last commit: %v, want a *CorruptError", err)
		}
	})
}

// A store another process holds is reported held, not checked: its files
// change under that process, and a check could call it damaged.
func TestHeldStoreIsNotChecked(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	create(t, s, "a", "working", t0)
	must(t, s.Close()) // the record goes to a table
	openStore(t, dir)  // held open (closed at the test's end) while another process checks
	tables, err := filepath.Glob(filepath.Join(dir, "*.sst"))
	must(t, err)
	if len(tables) == 0 {
		t.Fatal("no table to damage")
	}
	b, err := os.ReadFile(tables[0])
	must(t, err)
	b[len(b)/2] ^= 0xff // the holder may be rewriting it, as far as a second opener knows
	must(t, os.WriteFile(tables[0], b, 0o600))
	_, err = badger.Open(dir, nil)
	var locked *store.LockedError
	if !errors.As(err, &locked) {
		t.Fatalf("Open of a store another opener holds: %v, want a *LockedError", err)
	}
}
