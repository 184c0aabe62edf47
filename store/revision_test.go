package store_test

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store"
)

// hookLog records what the commit hook hears, and whether two calls ever
// overlapped.
type hookLog struct {
	mu       sync.Mutex
	changes  []store.Change
	ids      map[string]bool
	inFlight atomic.Int32
	overlap  atomic.Bool
}

func (h *hookLog) hook(cs []store.Change) {
	if h.inFlight.Add(1) > 1 {
		h.overlap.Store(true)
	}
	defer h.inFlight.Add(-1)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ids == nil {
		h.ids = map[string]bool{}
	}
	for _, c := range cs {
		h.changes = append(h.changes, c)
		h.ids[c.ID] = true
	}
}

func (h *hookLog) all() []store.Change {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.changes)
}

func (h *hookLog) heard(id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ids[id]
}

// checkContiguous fails unless the changes carry revisions from..to, each
// once, in order, and never came in overlapping calls.
func (h *hookLog) checkContiguous(t *testing.T, from, to uint64) {
	t.Helper()
	if h.overlap.Load() {
		t.Error("two hook calls ran at once")
	}
	cs := h.all()
	if uint64(len(cs)) != to-from+1 {
		t.Fatalf("hook heard %d changes, want revisions %d..%d", len(cs), from, to)
	}
	for i, c := range cs {
		if c.Rev != from+uint64(i) {
			t.Fatalf("hook change %d has revision %d, want %d (in order, no hole, none twice)", i, c.Rev, from+uint64(i))
		}
		if c.Task != nil && c.Task.Revision != c.Rev {
			t.Fatalf("hook change at %d carries a record of revision %d", c.Rev, c.Task.Revision)
		}
	}
}

func TestRevisionsIncreaseOnEveryWrite(t *testing.T) {
	s := newStore(t)
	var h hookLog
	s.SetCommitHook(h.hook)
	if r := s.Revision(); r != 0 {
		t.Fatalf("a new store is at revision %d, want 0", r)
	}
	var last uint64
	step := func(what string, rev uint64) {
		t.Helper()
		if rev <= last || s.Revision() != rev {
			t.Fatalf("after %s: revision %d, store at %d, previous %d; want it to grow and the store to be at it", what, rev, s.Revision(), last)
		}
		last = rev
	}
	a := create(t, s, "ka", model.StatusWorking, t0)
	step("Create", a.Revision)
	got, err := s.Get(a.ID)
	must(t, err)
	if got.Revision != a.Revision {
		t.Fatalf("Get has revision %d, Create set %d", got.Revision, a.Revision)
	}
	u, err := s.Update(a.ID, moveTo(model.StatusCompleted, t0.Add(time.Second)))
	must(t, err)
	step("Update", u.Revision)
	r, err := s.ReleaseKey(a.ID, func(*model.Task) bool { return true })
	must(t, err)
	step("ReleaseKey", r.Revision)
	b := create(t, s, "", model.StatusCompleted, t0)
	step("second Create", b.Revision)
	must(t, s.Delete(b.ID))
	step("Delete", s.Revision())
	if n, err := s.Prune(time.Time{}); err != nil || n != 1 {
		t.Fatalf("Prune = %d, %v; want 1", n, err)
	}
	step("Prune", s.Revision())
	// An Update that changes nothing is no change.
	c := create(t, s, "", model.StatusWorking, t0)
	step("third Create", c.Revision)
	if _, err := s.Update(c.ID, func(*model.Task) (bool, error) { return false, nil }); err != nil {
		t.Fatal(err)
	}
	if s.Revision() != last {
		t.Fatalf("an Update that changed nothing moved the revision to %d", s.Revision())
	}
	h.checkContiguous(t, 1, last)
	deleted := 0
	for _, ch := range h.all() {
		if ch.Task == nil {
			deleted++
		}
	}
	if deleted != 2 {
		t.Fatalf("hook heard %d deletions, want 2 (Delete and Prune)", deleted)
	}
}

func TestRevisionSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	a := create(t, s, "ka", model.StatusWorking, t0)
	b := create(t, s, "", model.StatusCompleted, t0)
	_, err := s.Update(a.ID, moveTo(model.StatusInputRequired, t0.Add(time.Second)))
	must(t, err)
	must(t, s.Delete(b.ID))
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

func revsOf(cs []store.Change) []string {
	var out []string
	for _, c := range cs {
		out = append(out, fmt.Sprintf("%d:%s:%v", c.Rev, c.ID, c.Task != nil))
	}
	return out
}

// A watcher that sets the hook, then takes a Snapshot, while 8 writers
// create, update and delete, ends with exactly the store's records.
func TestSnapshotPlusHookIsHistory(t *testing.T) {
	s := newStore(t)
	const writers, ops = 8, 60
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			var mine []string
			for i := range ops {
				var err error
				switch {
				case i%5 == 4 && len(mine) > 0:
					err = s.Delete(mine[0])
					mine = mine[1:]
				case i%2 == 1 && len(mine) > 0:
					_, err = s.Update(mine[len(mine)-1], func(t *model.Task) (bool, error) {
						t.StatusMessage = fmt.Sprintf("writer %d step %d", w, i)
						return true, nil
					})
				default:
					rec := intent("", t0)
					err = s.Create(rec)
					mine = append(mine, rec.ID)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	waitFor(t, func() bool { return s.Revision() >= 50 })
	var h hookLog
	s.SetCommitHook(h.hook)
	rev, snap, err := s.Snapshot()
	must(t, err)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	held := map[string]*model.Task{}
	for _, r := range snap {
		if r.Revision > rev {
			t.Fatalf("snapshot as of %d holds %s at revision %d", rev, r.ID, r.Revision)
		}
		held[r.ID] = r
	}
	var after []store.Change
	for _, c := range h.all() {
		if c.Rev > rev {
			after = append(after, c)
		}
	}
	for i, c := range after {
		if c.Rev != rev+1+uint64(i) {
			t.Fatalf("after the snapshot at %d the hook's change %d is at %d: a change was missed or heard twice", rev, i, c.Rev)
		}
		if old := held[c.ID]; old != nil && old.Revision >= c.Rev {
			t.Fatalf("change %d of %s is already in the snapshot", c.Rev, c.ID)
		}
		if c.Task == nil {
			delete(held, c.ID)
		} else {
			held[c.ID] = c.Task
		}
	}
	if want := s.Revision(); rev+uint64(len(after)) != want {
		t.Fatalf("snapshot at %d and %d changes do not reach the store's revision %d", rev, len(after), want)
	}
	all, err := s.All()
	must(t, err)
	if len(all) != len(held) {
		t.Fatalf("watcher holds %d records, the store %d", len(held), len(all))
	}
	for _, r := range all {
		got := held[r.ID]
		if got == nil || got.Revision != r.Revision || got.StatusMessage != r.StatusMessage {
			t.Fatalf("watcher holds %+v for %s, the store %+v", got, r.ID, r)
		}
	}
	if h.overlap.Load() {
		t.Error("two hook calls ran at once")
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestChangesSinceEachRecordOnceAtLatest(t *testing.T) {
	s := newStore(t)
	var recs []*model.Task
	for range 5 {
		recs = append(recs, create(t, s, "", model.StatusWorking, t0))
	}
	from := s.Revision()
	var h hookLog
	s.SetCommitHook(h.hook)
	for i := range 3 {
		_, err := s.Update(recs[0].ID, func(t *model.Task) (bool, error) {
			t.StatusMessage = fmt.Sprint("step ", i)
			return true, nil
		})
		must(t, err)
	}
	_, err := s.Update(recs[1].ID, moveTo(model.StatusCompleted, t0.Add(time.Second)))
	must(t, err)
	must(t, s.Delete(recs[2].ID))
	// Deleted, then created again under its id: one change, the record.
	must(t, s.Delete(recs[3].ID))
	again := recs[3].Clone()
	again.StatusMessage = "again"
	must(t, s.Create(again))
	// Created and deleted since: one tombstone.
	gone := create(t, s, "", model.StatusCalling, t0)
	must(t, s.Delete(gone.ID))

	// What the replay must be: the hook's changes, each record's last.
	var want []store.Change
	for _, c := range h.all() {
		want = slices.DeleteFunc(want, func(w store.Change) bool { return w.ID == c.ID })
		want = append(want, c)
	}
	got, upTo, ok, err := s.ChangesSince(from)
	must(t, err)
	if !ok || upTo != s.Revision() {
		t.Fatalf("ChangesSince(%d): ok %v up to %d; want ok up to %d", from, ok, upTo, s.Revision())
	}
	if fmt.Sprint(revsOf(got)) != fmt.Sprint(revsOf(want)) {
		t.Fatalf("ChangesSince(%d) =\n%v\nwant\n%v", from, revsOf(got), revsOf(want))
	}
	for _, c := range got {
		if c.Task != nil && (c.Task.Revision != c.Rev || c.Task.ID != c.ID) {
			t.Fatalf("change %d carries %s at revision %d", c.Rev, c.Task.ID, c.Task.Revision)
		}
	}
	// The revision index holds each live record once, however often it
	// was written.
	if n := keysUnder(t, s, "r\x00"); n != 4 {
		t.Fatalf("revision index has %d entries for 4 records", n)
	}
	if got[len(got)-2].Task.StatusMessage != "again" {
		t.Fatalf("the record created again replays as %+v", got[len(got)-2].Task)
	}
	if cs, upTo, ok, err := s.ChangesSince(s.Revision()); err != nil || !ok || len(cs) != 0 || upTo != s.Revision() {
		t.Fatalf("ChangesSince(now) = %v up to %d, ok %v, %v; want nothing, ok", revsOf(cs), upTo, ok, err)
	}
	// Everything since a new store: every record once, and the tombstones.
	all, _, ok, err := s.ChangesSince(0)
	must(t, err)
	if live, dead := countLive(all); !ok || live != 4 || dead != 2 {
		t.Fatalf("ChangesSince(0): ok %v, %d records and %d tombstones; want 4 and 2", ok, live, dead)
	}
	if _, _, ok, _ := s.ChangesSince(s.Revision() + 1); ok {
		t.Fatal("ChangesSince a revision the store never had is ok")
	}
}

func countLive(cs []store.Change) (live, dead int) {
	for _, c := range cs {
		if c.Task != nil {
			live++
		} else {
			dead++
		}
	}
	return live, dead
}

// createTerminal writes n completed records with 16 writers.
func createTerminal(t *testing.T, s *store.Store, n int) {
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

func tombstones(t *testing.T, s *store.Store) int { t.Helper(); return keysUnder(t, s, "d\x00") }

func keysUnder(t *testing.T, s *store.Store, prefix string) int {
	t.Helper()
	keys, err := store.Keys(s)
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
	// Two prune chunks, the second dropping the oldest tombstones.
	const kept, over = 1200, 50
	store.SetMaxTombstones(t, kept)
	s := newStore(t)
	createTerminal(t, s, kept+over)
	created := s.Revision()
	writes := store.Writes(s)
	if n, err := s.Prune(time.Time{}); err != nil || n != kept+over {
		t.Fatalf("Prune = %d, %v; want %d", n, err, kept+over)
	}
	if txns := store.Writes(s) - writes; txns != 2+1 {
		t.Fatalf("Prune used %d write txns, want 2 chunks and the compaction note", txns)
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

func TestHookHearsOnlyCommittedChanges(t *testing.T) {
	s := newStore(t)
	var h hookLog
	s.SetCommitHook(h.hook)
	const writers, each = 8, 40
	var wg sync.WaitGroup
	var committed atomic.Int64
	problems := make(chan string, writers*each)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				// Every fourth call repeats one of five keys: the first
				// with a key wins, the rest fail in their group.
				key := ""
				if i%4 == 0 {
					key = fmt.Sprint("dup-", (w*each+i)%5)
				}
				rec := intent(key, t0)
				err := s.Create(rec)
				var dup *store.DuplicateKeyError
				switch {
				case errors.As(err, &dup):
					if h.heard(rec.ID) {
						problems <- "the hook heard a Create that failed: " + rec.ID
					}
					continue
				case err != nil:
					problems <- err.Error()
					return
				}
				committed.Add(1)
				if !h.heard(rec.ID) {
					problems <- "Create returned before the hook heard it: " + rec.ID
				}
				// An Update whose fn fails commits nothing.
				_, err = s.Update(rec.ID, func(*model.Task) (bool, error) { return true, errors.New("refused") })
				if err == nil {
					problems <- "a refused Update succeeded"
				}
			}
		})
	}
	wg.Wait()
	close(problems)
	for p := range problems {
		t.Error(p)
	}
	if want := uint64(committed.Load()); s.Revision() != want {
		t.Fatalf("store at revision %d after %d committed creates: failed commits left holes", s.Revision(), want)
	}
	h.checkContiguous(t, 1, s.Revision())
}

func TestStoredRecordIsItsJSONWithTheRevision(t *testing.T) {
	s := newStore(t)
	rec := create(t, s, "k", model.StatusCompleted, t0)
	raw, err := store.Raw(s, "t\x00"+rec.ID)
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
	if store.SyncedWAL(s) == "" {
		t.Skip("the store syncs with db.Sync here")
	}
	var h hookLog
	s.SetCommitHook(h.hook)
	a := create(t, s, "", model.StatusCalling, t0)
	store.BreakWALSync(s)
	b := intent("", t0)
	if err := s.Create(b); err == nil {
		t.Fatal("Create succeeded with its sync failing")
	}
	if h.heard(b.ID) {
		t.Fatal("the hook heard a change before it was synced")
	}
	store.RepairWALSync(s)
	c := create(t, s, "", model.StatusCalling, t0)
	h.checkContiguous(t, a.Revision, c.Revision)
	if !h.heard(b.ID) {
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
	must(t, store.PutRaw(s, "t\x00"+rec.ID, string(old)))
	must(t, store.DeleteRaw(s, "n\x00"))
	must(t, store.DeleteRaw(s, "r\x00"+string(binary.BigEndian.AppendUint64(nil, 1))))
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
	must(t, s.Delete(rec.ID))
	if s.Revision() != 1 || tombstones(t, s) != 1 {
		t.Fatalf("after the deletion: revision %d, %d tombstones; want 1 and 1", s.Revision(), tombstones(t, s))
	}
	if keys, _ := store.Keys(s); slices.ContainsFunc(keys, func(k string) bool { return strings.HasPrefix(k, "r\x00") }) {
		t.Fatalf("a revision entry is left: %q", keys)
	}
}
