package badger_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store/badger"
)

// The store syncs one file per commit instead of Badger's two. That is
// only durable if the file it syncs is the one Badger wrote the commit
// to, through every change of memtable; this checks it after each commit.
func TestEachCommitSyncsTheWALHoldingIt(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	newestWAL := func() string {
		entries, err := os.ReadDir(dir)
		must(t, err)
		var wals []string
		for _, e := range entries {
			if strings.HasSuffix(e.Name(), ".mem") {
				wals = append(wals, e.Name())
			}
		}
		slices.Sort(wals)
		if len(wals) == 0 {
			t.Fatal("no memtable WAL in the store")
		}
		return filepath.Join(dir, wals[len(wals)-1])
	}
	// 16 KiB of arguments: the 8 MiB memtable fills every ~500 records.
	args, _ := json.Marshal(map[string]string{"blob": strings.Repeat("x", 16<<10)})
	var walsSeen []string
	for i := range 1300 {
		rec := model.NewIntent(model.ServerRef{Name: "demo"}, "sleep", args, "", t0)
		must(t, s.Create(rec))
		synced := badger.SyncedWAL(s)
		if synced == "" || synced != newestWAL() {
			t.Fatalf("record %d: synced %q, but the newest WAL is %q", i, synced, newestWAL())
		}
		if len(walsSeen) == 0 || walsSeen[len(walsSeen)-1] != synced || i%50 == 0 {
			data, err := os.ReadFile(synced)
			must(t, err)
			if !bytes.Contains(data, []byte(rec.ID)) {
				t.Fatalf("record %d (%s) is not in %s, the file synced for it", i, rec.ID, synced)
			}
		}
		if len(walsSeen) == 0 || walsSeen[len(walsSeen)-1] != synced {
			walsSeen = append(walsSeen, synced)
		}
	}
	if len(walsSeen) < 3 {
		t.Fatalf("the memtable changed %d times; the test needs it to change", len(walsSeen)-1)
	}
}

// A commit into a WAL that Badger has just created is durable only once
// the directory entry naming the file is too: fdatasync of the file does
// not sync its directory, and Badger's file creation (ristretto's
// OpenMmapFileUsing, v2.2.0) means to sync it but never does. The first
// commit into every WAL, the one Open made and each one after a memtable
// change, must sync the store's directory before it returns.
func TestFirstCommitIntoEachWALSyncsTheDirectory(t *testing.T) {
	dir := t.TempDir()
	// Reopened, so that no commit (a new store's schema) precedes the hook.
	must(t, openStore(t, dir).Close())
	s := openStore(t, dir)
	var synced []string
	badger.OnSync(s, func(path string) { synced = append(synced, path) })
	args, _ := json.Marshal(map[string]string{"blob": strings.Repeat("x", 16<<10)})
	wal, wals := "", 0
	for i := range 1100 {
		synced = synced[:0]
		must(t, s.Create(model.NewIntent(model.ServerRef{Name: "demo"}, "sleep", args, "", t0)))
		now := badger.SyncedWAL(s)
		if !slices.Contains(synced, now) {
			t.Fatalf("commit %d: synced %v, not its WAL %s", i, synced, now)
		}
		if now == wal {
			continue
		}
		wal, wals = now, wals+1
		if !slices.Contains(synced, dir) {
			t.Fatalf("commit %d, the first into %s: synced %v, not the directory %s", i, filepath.Base(now), synced, dir)
		}
	}
	if wals < 3 {
		t.Fatalf("commits went to %d WALs; the test needs the memtable to change", wals)
	}
}
