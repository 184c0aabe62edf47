package store_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store"
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
		synced := store.SyncedWAL(s)
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
