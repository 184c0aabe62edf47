package badger_test

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store/badger"
	"github.com/taskdeck/taskdeck/store/storetest"
)

type hookLog = storetest.HookLog

var (
	revsOf    = storetest.RevsOf
	countLive = storetest.CountLive
)

func TestRevisionSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	a := create(t, s, "ka", model.StatusWorking, t0)
	b := create(t, s, "", model.StatusCompleted, t0)
	_, err := s.Update(a.ID, moveTo(model.StatusInputRequired, t0.Add(time.Second)))
	must(t, err)
	must(t, s.Delete(b.ID, tester))
	rev := s.Revision()
	before, upTo, ok, err := s.ChangesSince(0)
	must(t, err)
	if !ok || upTo != rev {
		t.Fatalf("ChangesSince(0) = ok %v up to %d; want ok up to %d", ok, upTo, rev)
	}
	must(t, s.Close())

	s = openStore(t, dir)
	if s.Revision() != rev {
		t.Fatalf("reopened at revision %d, closed at %d", s.Revision(), rev)
	}
	after, _, _, err := s.ChangesSince(0)
	must(t, err)
	if fmt.Sprint(revsOf(after)) != fmt.Sprint(revsOf(before)) {
		t.Fatalf("replay after reopen %v, before %v", revsOf(after), revsOf(before))
	}
	c := create(t, s, "", model.StatusCalling, t0)
	if c.Revision != rev+1 {
		t.Fatalf("first write after reopen got revision %d, want %d", c.Revision, rev+1)
	}
}

// createTerminal writes n completed records with 16 writers.
func createTerminal(t *testing.T, s *badger.Store, n int) {
	t.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Value
	for range 16 {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				rec := intent("", t0)
				rec.Status = model.StatusCompleted
				if err := s.Create(rec); err != nil {
					failed.CompareAndSwap(nil, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		t.Fatal(err)
	}
}

func tombstones(t *testing.T, s *badger.Store) int { t.Helper(); return keysUnder(t, s, "d\x00") }

func keysUnder(t *testing.T, s *badger.Store, prefix string) int {
	t.Helper()
	keys, err := badger.Keys(s)
	must(t, err)
	n := 0
	for _, k := range keys {
		if strings.HasPrefix(k, prefix) {
			n++
		}
	}
	return n
}

func TestChangesSinceRefusesBelowTheFloor(t *testing.T) {
	// Prune chunks, the last dropping the oldest tombstones.
	const kept, over = 1200, 50
	badger.SetMaxTombstones(t, kept)
	s := newStore(t)
	createTerminal(t, s, kept+over)
	created := s.Revision()
	writes := badger.Writes(s)
	if n, err := s.Prune(time.Time{}, tester); err != nil || n != kept+over {
		t.Fatalf("Prune = %d, %v; want %d", n, err, kept+over)
	}
	if txns, chunks := badger.Writes(s)-writes, (kept+over+badger.PruneChunk-1)/badger.PruneChunk; txns != int64(chunks)+1 {
		t.Fatalf("Prune used %d write txns, want %d chunks and the compaction note", txns, chunks)
	}
	if n := tombstones(t, s); n != kept {
		t.Fatalf("%d tombstones kept, want %d", n, kept)
	}
	// The oldest 50 tombstones are gone: a watcher at a revision before
	// the 50th deletion could miss one.
	floor := created + over
	if _, upTo, ok, err := s.ChangesSince(floor - 1); err != nil || ok || upTo != s.Revision() {
		t.Fatalf("ChangesSince(%d) below the floor: ok %v up to %d, %v; want not ok", floor-1, ok, upTo, err)
	}
	if _, _, ok, _ := s.ChangesSince(0); ok {
		t.Fatal("ChangesSince(0) is ok after tombstones were dropped")
	}
	cs, _, ok, err := s.ChangesSince(floor)
	must(t, err)
	if live, dead := countLive(cs); !ok || live != 0 || dead != kept {
		t.Fatalf("ChangesSince(floor): ok %v, %d records, %d tombstones; want %d tombstones", ok, live, dead, kept)
	}
}

func TestStoredRecordIsItsJSONWithTheRevision(t *testing.T) {
	s := newStore(t)
	rec := create(t, s, "k", model.StatusCompleted, t0)
	raw, err := badger.Raw(s, "t\x00"+rec.ID)
	must(t, err)
	got, err := s.Get(rec.ID)
	must(t, err)
	want, err := json.Marshal(got)
	must(t, err)
	if raw != string(want) || !strings.Contains(raw, fmt.Sprintf(`"revision":%d}`, rec.Revision)) {
		t.Fatalf("stored %s\nwant %s", raw, want)
	}
}

// A commit whose sync failed is visible to reads, so a watcher must hear
// of it: with the next commit that syncs, in order.
func TestChangesOfAFailedSyncComeWithTheNext(t *testing.T) {
	s := newStore(t)
	if badger.SyncedWAL(s) == "" {
		t.Skip("the store syncs with db.Sync here")
	}
	var h hookLog
	s.SetCommitHook(h.Hook)
	a := create(t, s, "", model.StatusCalling, t0)
	badger.BreakWALSync(s)
	b := intent("", t0)
	if err := s.Create(b); err == nil {
		t.Fatal("Create succeeded with its sync failing")
	}
	if h.Heard(b.ID) {
		t.Fatal("the hook heard a change before it was synced")
	}
	badger.RepairWALSync(s)
	c := create(t, s, "", model.StatusCalling, t0)
	h.CheckContiguous(t, a.Revision, c.Revision)
	if !h.Heard(b.ID) {
		t.Fatal("the change whose sync failed was never heard")
	}
}

// A store written before revisions has records at revision 0 that no
// index holds: replay from 0 is refused, a Snapshot has them.
func TestStoreFromBeforeRevisions(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	rec := create(t, s, "", model.StatusCompleted, t0)
	rec.Revision = 0
	old, err := json.Marshal(rec)
	must(t, err)
	must(t, badger.PutRaw(s, "t\x00"+rec.ID, string(old)))
	must(t, badger.DeleteRaw(s, "n\x00"))
	must(t, badger.DeleteRaw(s, "r\x00"+string(binary.BigEndian.AppendUint64(nil, 1))))
	must(t, s.Close())

	s = openStore(t, dir)
	if _, _, ok, err := s.ChangesSince(0); err != nil || ok {
		t.Fatalf("ChangesSince(0) on a store from before revisions: ok %v, %v; want not ok", ok, err)
	}
	rev, snap, err := s.Snapshot()
	must(t, err)
	if rev != 0 || len(snap) != 1 || snap[0].Revision != 0 {
		t.Fatalf("Snapshot = %d, %v", rev, snap)
	}
	// Its deletion is the first revision, and leaves only a tombstone.
	must(t, s.Delete(rec.ID, tester))
	if s.Revision() != 1 || tombstones(t, s) != 1 {
		t.Fatalf("after the deletion: revision %d, %d tombstones; want 1 and 1", s.Revision(), tombstones(t, s))
	}
	if keys, _ := badger.Keys(s); slices.ContainsFunc(keys, func(k string) bool { return strings.HasPrefix(k, "r\x00") }) {
		t.Fatalf("a revision entry is left: %q", keys)
	}
}

// The revision index holds each live record once, however often it was
// written.
func TestRevisionIndexHoldsEachRecordOnce(t *testing.T) {
	s := newStore(t)
	a := create(t, s, "", model.StatusWorking, t0)
	create(t, s, "", model.StatusWorking, t0)
	for i := range 3 {
		_, err := s.Update(a.ID, func(t *model.Task) (bool, error) { t.StatusMessage = fmt.Sprint(i); return true, nil })
		must(t, err)
	}
	if n := keysUnder(t, s, "r\x00"); n != 2 {
		t.Fatalf("revision index has %d entries for 2 records", n)
	}
}
