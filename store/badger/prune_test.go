package badger_test

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store/badger"
)

func TestPrune(t *testing.T) {
	s := newStore(t)
	old, cutoff, recent := t0, t0.Add(time.Hour), t0.Add(2*time.Hour)

	// More old terminal records than three chunks of 1000 minus one, so
	// that one txn for all of them would exceed Badger's batch limit
	// (9000 deletes; 5000 records failed in one txn in libraries.md).
	terminal := []model.Status{model.StatusCompleted, model.StatusFailed, model.StatusCancelled, model.StatusUnknown}
	const oldTerminal = 2600
	for i := range oldTerminal {
		key := ""
		if i%2 == 0 {
			key = fmt.Sprintf("old-%d", i)
		}
		create(t, s, key, terminal[i%len(terminal)], old)
	}
	var keep []*model.Task
	for _, st := range terminal[:3] {
		keep = append(keep, create(t, s, "recent-"+string(st), st, recent))
	}
	var open []*model.Task
	for _, st := range []model.Status{model.StatusCalling, model.StatusWorking, model.StatusInputRequired, model.StatusOrphaned} {
		open = append(open, create(t, s, "open-"+string(st), st, old)) // old, but never pruned
	}

	writes := badger.Writes(s)
	n, err := s.Prune(cutoff, tester)
	if err != nil {
		t.Fatalf("Prune: %v", err)
	}
	if n != oldTerminal {
		t.Fatalf("Prune deleted %d, want %d", n, oldTerminal)
	}
	// Chunks of at most PruneChunk, and the note to compact at next open.
	if txns, chunks := badger.Writes(s)-writes, (oldTerminal+badger.PruneChunk-1)/badger.PruneChunk; txns != int64(chunks)+1 {
		t.Errorf("Prune used %d write txns for %d records, want %d chunks of at most %d and the compaction note", txns, oldTerminal, chunks, badger.PruneChunk)
	}

	all, err := s.All()
	must(t, err)
	if want := sortedIDs(append(slices.Clone(keep), open...)...); !slices.Equal(ids(all), want) {
		t.Fatalf("after Prune, All has %d records, want the %d recent and open ones", len(all), len(want))
	}
	counts, err := s.Counts()
	must(t, err)
	for _, st := range terminal[:3] {
		if counts[st] != 1 {
			t.Errorf("Counts[%s] = %d, want 1 (the recent one)", st, counts[st])
		}
	}
	if counts[model.StatusUnknown] != 0 {
		t.Errorf("Counts[unknown] = %d, want 0", counts[model.StatusUnknown])
	}
	// Pruned records took their idempotency keys with them.
	if _, err := s.ByKey("old-0"); err == nil {
		t.Error("a pruned record's idempotency key still resolves")
	}
	if _, err := s.ByKey("recent-completed"); err != nil {
		t.Errorf("a kept record's key: %v", err)
	}

	// Idempotent: nothing more is due at this cutoff.
	if n, err := s.Prune(cutoff, tester); err != nil || n != 0 {
		t.Fatalf("second Prune = %d, %v; want 0, nil", n, err)
	}
	// A zero cutoff takes every terminal record, and still no open one.
	if n, err := s.Prune(time.Time{}, tester); err != nil || n != len(keep) {
		t.Fatalf("Prune(zero) = %d, %v; want %d", n, err, len(keep))
	}
	rest, err := s.All()
	must(t, err)
	if !slices.Equal(ids(rest), sortedIDs(open...)) {
		t.Fatalf("after Prune(zero), All = %v, want the open records %v", ids(rest), sortedIDs(open...))
	}
	// Only the open records' keys remain (record, status, key index and
	// revision entry each), with the schema version, the revision record,
	// the counts, a tombstone for each record pruned, and the audit log
	// (which pruning records keeps). (The note to compact is gone: Prune
	// compacted at once.)
	keys, err := badger.Keys(s)
	must(t, err)
	keys = slices.DeleteFunc(keys, func(k string) bool { return strings.HasPrefix(k, "a\x00") })
	tombs := len(slices.DeleteFunc(slices.Clone(keys), func(k string) bool { return !strings.HasPrefix(k, "d\x00") }))
	if want := 3 + 4*len(open); len(keys)-tombs != want {
		t.Fatalf("%d keys left besides tombstones, want %d", len(keys)-tombs, want)
	}
	if want := oldTerminal + len(keep); tombs != want {
		t.Fatalf("%d tombstones, want one per pruned record, %d", tombs, want)
	}
}

func TestPruneGivesDiskSpaceBack(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	createFinished(t, s, 64*1000)
	must(t, s.Close())
	full := dirBytes(t, dir)

	s = openStore(t, dir)
	if n, err := s.Prune(time.Time{}, tester); err != nil || n != 64000 {
		t.Fatalf("pruned %d: %v", n, err)
	}
	// Their audit entries stay until the log is pruned too.
	if n, err := s.PruneAudit(time.Now().Add(time.Hour)); err != nil || n != 2*64000 {
		t.Fatalf("pruned %d audit entries: %v", n, err)
	}
	must(t, s.Close())
	// The space comes back when the store is next opened.
	s = openStore(t, dir)
	must(t, s.Close())
	after := dirBytes(t, dir)
	t.Logf("%d records: %d bytes; after pruning them and the audit log, and reopening: %d bytes", 64000, full, after)
	if after >= full*3/4 {
		t.Fatalf("the store holds %d bytes after pruning every record, %d before: pruning gave no space back", after, full)
	}
}

func dirBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		n += info.Size()
		return nil
	})
	must(t, err)
	return n
}

// createFinished creates n finished records, 64 writers at a time (so
// that they share group commits, as a busy owner's do).
func createFinished(t *testing.T, s *badger.Store, n int) {
	t.Helper()
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for range n / 64 {
				rec := model.NewIntent(model.ServerRef{Name: "s"}, "tool", json.RawMessage(`{"seconds":5}`), "", t0)
				rec.Status = model.StatusCompleted
				rec.Result = json.RawMessage(`{"content":[{"type":"text","text":"slept 5 s"}]}`)
				if err := s.Create(rec); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}
