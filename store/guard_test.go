package store_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store"
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
				_, err := store.Open(dir, nil)
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
