package badger_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/internal/waitfor"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store"
	"github.com/taskdeck/taskdeck/store/badger"
)

// closedStore makes a store with three records, closed cleanly.
func closedStore(t *testing.T) (dir string, tables []string) {
	t.Helper()
	dir = t.TempDir()
	s := openStore(t, dir)
	for _, k := range []string{"a", "b", "c"} {
		create(t, s, k, model.StatusWorking, t0)
	}
	must(t, s.Close())
	tables, _ = filepath.Glob(filepath.Join(dir, "*.sst"))
	if len(tables) == 0 {
		t.Fatal("no table files after a clean close")
	}
	return dir, tables
}

// TestDamageBadgerWouldNotReport: damage that Badger would turn into a
// panic it cannot recover (a table cut short) or into silent deletion of
// every table (a MANIFEST missing or cut short) is refused as damaged,
// and the files are left as they were.
func TestDamageBadgerWouldNotReport(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, dir string, tables []string)
		want   string
	}{
		{"MANIFEST missing", func(t *testing.T, dir string, _ []string) {
			must(t, os.Remove(filepath.Join(dir, "MANIFEST")))
		}, "MANIFEST is missing"},
		{"MANIFEST cut short", func(t *testing.T, dir string, _ []string) {
			fi, err := os.Stat(filepath.Join(dir, "MANIFEST"))
			must(t, err)
			must(t, os.Truncate(filepath.Join(dir, "MANIFEST"), fi.Size()/2))
		}, "MANIFEST is cut short"},
		{"table cut short", func(t *testing.T, _ string, tables []string) {
			must(t, os.Truncate(tables[0], 100))
		}, "is cut short or damaged"},
		{"table of 3 bytes", func(t *testing.T, _ string, tables []string) {
			must(t, os.Truncate(tables[0], 3))
		}, "is cut short (3 bytes)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, tables := closedStore(t)
			tc.damage(t, dir, tables)
			for range 2 {
				_, err := badger.Open(dir, nil)
				var corrupt *store.CorruptError
				if !errors.As(err, &corrupt) || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("Open: %v, want a *CorruptError saying %q", err, tc.want)
				}
				assertOneLine(t, err)
			}
			for _, f := range tables {
				if _, err := os.Stat(f); err != nil {
					t.Fatalf("table %s gone after a refused open: %v", f, err)
				}
			}
		})
	}
}

// TestLeftoverTableStillOpens: a table the (whole) MANIFEST does not list
// is what a crash in the middle of a flush or compaction leaves, complete
// or still empty; Badger removes it and the store opens with every record.
func TestLeftoverTableStillOpens(t *testing.T) {
	for _, size := range []int{-1, 0} {
		dir, tables := closedStore(t)
		b, err := os.ReadFile(tables[0])
		must(t, err)
		if size >= 0 {
			b = b[:size]
		}
		must(t, os.WriteFile(filepath.Join(dir, "000999.sst"), b, 0o600))
		s := openStore(t, dir)
		all, err := s.All()
		must(t, err)
		if len(all) != 3 {
			t.Fatalf("%d records, want 3", len(all))
		}
	}
}

// After a clean close a table whose file has not changed since it was
// summed is not read again at open (a read of the whole store, 200 MB at
// 1,000,000 records); one changed in place, or any table after a session
// that left commits to replay, is read and checked.
func TestCleanCloseTrustsUnchangedTables(t *testing.T) {
	dir, _ := closedStore(t)
	// Its one level-0 table is compacted into a new one at the next open;
	// let that happen first, so that the tables summed below are still
	// those on disk when the open store is checked.
	s := openStore(t, dir)
	waitfor.Within(t, 10*time.Second, "the level-0 table compacted", func() bool { return badger.Level0Tables(s) == 0 })
	must(t, s.Close())
	must(t, badger.ForgeSums(dir))
	s = openStore(t, dir) // not read: the forged sums go unnoticed
	create(t, s, "d", model.StatusWorking, t0)
	// Its commit is in the WAL, as a crash would leave it: read.
	var corrupt *store.CorruptError
	if err := badger.CheckFiles(dir); !errors.As(err, &corrupt) || !strings.Contains(err.Error(), "has changed since it was written") {
		t.Fatalf("check with commits to replay: %v, want the tables read and found changed", err)
	}
	must(t, s.Close())

	dir, tables := closedStore(t)
	f, err := os.OpenFile(tables[0], os.O_RDWR, 0)
	must(t, err)
	b := make([]byte, 1)
	_, err = f.ReadAt(b, 40)
	must(t, err)
	b[0] ^= 0x10
	_, err = f.WriteAt(b, 40)
	must(t, err)
	must(t, f.Close())
	if _, err := badger.Open(dir, nil); !errors.As(err, &corrupt) || !strings.Contains(err.Error(), "has changed since it was written") {
		t.Fatalf("Open after a table changed in place: %v, want it refused as changed", err)
	}
}
