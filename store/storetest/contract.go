package storetest

import (
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

func testIndexesFollowStatus(t *testing.T, s store.Backend) {
	a := Create(t, s, "a", model.StatusCalling, T0)
	b := Create(t, s, "", model.StatusCalling, T0)
	c := Create(t, s, "c", model.StatusCalling, T0)
	d := Create(t, s, "", model.StatusCalling, T0)

	at := T0.Add(time.Second)
	steps := []struct {
		rec *model.Task
		to  model.Status
	}{
		{a, model.StatusWorking}, {b, model.StatusWorking}, {c, model.StatusOrphaned},
		{a, model.StatusInputRequired}, {b, model.StatusCompleted}, {a, model.StatusWorking},
		{a, model.StatusFailed}, {d, model.StatusInputRequired},
	}
	for _, step := range steps {
		_, err := s.Update(step.rec.ID, MoveTo(step.to, at))
		Must(t, err)
	}
	// a failed, b completed, c orphaned, d input_required.
	wantCounts := map[model.Status]int{
		model.StatusFailed: 1, model.StatusCompleted: 1, model.StatusOrphaned: 1, model.StatusInputRequired: 1,
	}
	counts, err := s.Counts()
	Must(t, err)
	if fmt.Sprint(counts) != fmt.Sprint(wantCounts) {
		t.Fatalf("Counts = %v, want %v", counts, wantCounts)
	}
	for st, want := range map[model.Status][]string{
		model.StatusWorking:       nil,
		model.StatusCalling:       nil,
		model.StatusFailed:        {a.ID},
		model.StatusCompleted:     {b.ID},
		model.StatusInputRequired: {d.ID},
	} {
		got, err := s.ByStatus(st)
		Must(t, err)
		if !slices.Equal(IDs(got), want) {
			t.Errorf("ByStatus(%s) = %v, want %v", st, IDs(got), want)
		}
		for _, rec := range got {
			if rec.Status != st {
				t.Errorf("ByStatus(%s) returned a %s record", st, rec.Status)
			}
		}
	}
	both, err := s.ByStatus(model.StatusFailed, model.StatusCompleted, model.StatusFailed)
	Must(t, err)
	if !slices.Equal(IDs(both), SortedIDs(a, b)) {
		t.Errorf("ByStatus(failed, completed, failed) = %v, want %v", IDs(both), SortedIDs(a, b))
	}
	// Handles: the same records as ByStatus, as their handles.
	_, err = s.Update(d.ID, func(r *model.Task) (bool, error) { r.TaskID = "srv-d"; return true, nil })
	Must(t, err)
	for _, st := range [][]model.Status{{model.StatusInputRequired}, {model.StatusFailed, model.StatusCompleted, model.StatusOrphaned, model.StatusInputRequired}, {model.StatusWorking}} {
		recs, err := s.ByStatus(st...)
		Must(t, err)
		hs, err := s.Handles(st...)
		Must(t, err)
		var want []model.Handle
		for _, rec := range recs {
			want = append(want, rec.Handle())
		}
		if !slices.Equal(hs, want) {
			t.Errorf("Handles(%v) = %+v, want the handles of ByStatus's records %+v", st, hs, want)
		}
	}
	open, err := s.OpenTasks()
	Must(t, err)
	if !slices.Equal(IDs(open), SortedIDs(c, d)) {
		t.Errorf("OpenTasks = %v, want %v (orphaned and input_required)", IDs(open), SortedIDs(c, d))
	}
	all, err := s.All()
	Must(t, err)
	if !slices.Equal(IDs(all), SortedIDs(a, b, c, d)) {
		t.Errorf("All = %v, want %v", IDs(all), SortedIDs(a, b, c, d))
	}

	Must(t, s.Delete(b.ID, Tester))
	counts, err = s.Counts()
	Must(t, err)
	if counts[model.StatusCompleted] != 0 || len(counts) != 3 {
		t.Fatalf("Counts after deleting the completed record = %v", counts)
	}
	if got, _ := s.ByStatus(model.StatusCompleted); len(got) != 0 {
		t.Fatalf("ByStatus(completed) after Delete = %v", IDs(got))
	}
}

func testAllIsSortedByCreation(t *testing.T, s store.Backend) {
	var want []string
	for i := range 5 {
		rec := Intent("", T0.Add(time.Duration(4-i)*time.Hour)) // created newest first
		Must(t, s.Create(rec))
		want = append([]string{rec.ID}, want...)
	}
	all, err := s.All()
	Must(t, err)
	if !slices.Equal(IDs(all), want) {
		t.Fatalf("All = %v, want oldest first %v", IDs(all), want)
	}
}

// MatchIDs finds the ids that start or end with a part, in id order, at
// most as many as asked for; a deleted record's id is not among them.
func testMatchIDs(t *testing.T, s store.Backend) {
	var ids []string
	for i := range 4 {
		rec := Intent("", T0.Add(time.Duration(i)*time.Millisecond))
		Must(t, s.Create(rec))
		ids = append(ids, rec.ID)
	}
	match := func(part string, limit int) []string {
		t.Helper()
		got, err := s.MatchIDs(part, limit)
		Must(t, err)
		return got
	}
	want := func(part string) (out []string) {
		for _, id := range ids {
			if strings.HasPrefix(id, part) || strings.HasSuffix(id, part) {
				out = append(out, id)
			}
		}
		return out
	}
	last := ids[3]
	for _, part := range []string{ids[0][:4], last[len(last)-5:], last[:len(last)-1], last[1:], "!"} {
		if got := match(part, 10); !slices.Equal(got, want(part)) {
			t.Errorf("MatchIDs(%q, 10) = %v, want %v", part, got, want(part))
		}
	}
	if got := match(ids[0][:4], 2); !slices.Equal(got, ids[:2]) {
		t.Errorf("MatchIDs(%q, 2) = %v, want the first two %v", ids[0][:4], got, ids[:2])
	}
	Must(t, s.Delete(ids[1], model.EngineActor("")))
	if got := match(ids[1], 10); len(got) != 0 {
		t.Errorf("MatchIDs of deleted %s = %v, want none", ids[1], got)
	}
}

func testCreateRefusesBadRecords(t *testing.T, s store.Backend) {
	rec := Intent("", T0)
	Must(t, s.Create(rec))
	if err := s.Create(rec); err == nil {
		t.Fatal("Create of an existing id succeeded")
	}
	bad := Intent("", T0)
	bad.Status = "sleeping"
	if err := s.Create(bad); err == nil {
		t.Fatal("Create with an unknown status succeeded")
	}
	bad = Intent("", T0)
	bad.ID = ""
	if err := s.Create(bad); err == nil {
		t.Fatal("Create without an id succeeded")
	}
	all, err := s.All()
	Must(t, err)
	if len(all) != 1 {
		t.Fatalf("%d records after refused creates, want 1", len(all))
	}
}

func testDuplicateKey(t *testing.T, s store.Backend) {
	first := Intent("same", T0)
	Must(t, s.Create(first))
	before := s.Revision()

	err := s.Create(Intent("same", T0.Add(time.Second)))
	var dup *store.DuplicateKeyError
	if !errors.As(err, &dup) {
		t.Fatalf("second Create: %v, want *DuplicateKeyError", err)
	}
	if dup.Key != "same" || dup.Existing == nil || dup.Existing.ID != first.ID {
		t.Fatalf("DuplicateKeyError = %+v, want key same naming %s", dup, first.ID)
	}
	if want := `idempotency key "same" already names task ` + first.ID; err.Error() != want {
		t.Fatalf("message %q, want %q", err, want)
	}
	if s.Revision() != before {
		t.Fatal("a refused Create committed a write")
	}
	all, err := s.All()
	Must(t, err)
	if len(all) != 1 {
		t.Fatalf("%d records, want 1", len(all))
	}
}

// Eight creates race on one key, over several rounds because a single
// round often serialises by chance: exactly one wins each round.
func testConcurrentCreateOneKeyOneWinner(t *testing.T, s store.Backend) {
	const n, rounds = 8, 20
	for round := range rounds {
		key := fmt.Sprintf("race-%d", round)
		recs := make([]*model.Task, n)
		errs := make([]error, n)
		for i := range recs {
			recs[i] = Intent(key, T0)
		}
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			wg.Go(func() {
				<-start
				errs[i] = s.Create(recs[i])
			})
		}
		close(start)
		wg.Wait()

		winner := -1
		for i, err := range errs {
			if err == nil {
				if winner >= 0 {
					t.Fatalf("round %d: both %d and %d won", round, winner, i)
				}
				winner = i
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no Create won: %v", round, errs)
		}
		for i, err := range errs {
			var dup *store.DuplicateKeyError
			if i != winner && (!errors.As(err, &dup) || dup.Existing.ID != recs[winner].ID) {
				t.Fatalf("round %d: loser %d: %v, want a DuplicateKeyError naming the winner", round, i, err)
			}
		}
		if got, err := s.ByKey(key); err != nil || got.ID != recs[winner].ID {
			t.Fatalf("round %d: ByKey = %v, %v; want the winner", round, got, err)
		}
	}
	all, err := s.All()
	Must(t, err)
	if len(all) != rounds {
		t.Fatalf("%d records after %d rounds, want one per round", len(all), rounds)
	}
}

func testUpdateErrorWritesNothing(t *testing.T, s store.Backend) {
	rec := Create(t, s, "k", model.StatusWorking, T0)
	writes := s.Revision()

	// An illegal move (working → calling) fails in model; fn passes it on.
	_, err := s.Update(rec.ID, MoveTo(model.StatusCalling, T0.Add(time.Minute)))
	var te *model.TransitionError
	if !errors.As(err, &te) {
		t.Fatalf("Update: %v, want the TransitionError from fn", err)
	}
	if s.Revision() != writes {
		t.Fatal("a failed Update committed a write")
	}
	got, err := s.Get(rec.ID)
	Must(t, err)
	if got.Status != model.StatusWorking || len(got.History) != len(rec.History) {
		t.Fatalf("record changed by a failed Update: %+v", got)
	}
	counts, err := s.Counts()
	Must(t, err)
	if counts[model.StatusWorking] != 1 || len(counts) != 1 {
		t.Fatalf("Counts = %v", counts)
	}
}

func testUpdateMayNotChangeIdentity(t *testing.T, s store.Backend) {
	rec := Create(t, s, "k", model.StatusWorking, T0)
	if _, err := s.Update(rec.ID, func(t *model.Task) (bool, error) {
		t.IdempotencyKey = "other"
		return true, nil
	}); err == nil {
		t.Fatal("Update changed the idempotency key")
	}
	if _, err := s.ByKey("k"); err != nil {
		t.Fatalf("ByKey(k) after refused update: %v", err)
	}
}

// Concurrent updates of one record must not lose each other's changes:
// a writer that lost the race runs fn again on the newer record.
func testConcurrentUpdatesAreNotLost(t *testing.T, s store.Backend) {
	rec := Create(t, s, "", model.StatusInputRequired, T0)
	const writers, each = 4, 10
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				_, err := s.Update(rec.ID, func(t *model.Task) (bool, error) {
					t.MarkAnswered([]string{fmt.Sprintf("w%d-%d", w, i)}, T0)
					return true, nil
				})
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	got, err := s.Get(rec.ID)
	Must(t, err)
	if len(got.AnsweredKeys) != writers*each {
		t.Fatalf("%d answered keys kept, want %d", len(got.AnsweredKeys), writers*each)
	}
}

func testNewestReadsTheLatestRecords(t *testing.T, s store.Backend) {
	var ids []string
	for i := range 30 {
		rec := Create(t, s, "", model.StatusCompleted, T0.Add(time.Duration(i)*time.Second))
		ids = append(ids, rec.ID)
	}
	got, err := s.Newest(5)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 5 {
		t.Fatalf("Newest(5) returned %d records", len(got))
	}
	for i, rec := range got {
		if want := ids[len(ids)-1-i]; rec.ID != want {
			t.Fatalf("Newest(5)[%d] = %s, want %s", i, rec.ID, want)
		}
	}
	if all, _ := s.Newest(100); len(all) != 30 {
		t.Fatalf("Newest(100) on 30 records returned %d", len(all))
	}
}

func testRevisionsIncreaseOnEveryWrite(t *testing.T, s store.Backend) {
	var h HookLog
	s.SetCommitHook(h.Hook)
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
	a := Create(t, s, "ka", model.StatusWorking, T0)
	step("Create", a.Revision)
	got, err := s.Get(a.ID)
	Must(t, err)
	if got.Revision != a.Revision {
		t.Fatalf("Get has revision %d, Create set %d", got.Revision, a.Revision)
	}
	u, err := s.Update(a.ID, MoveTo(model.StatusCompleted, T0.Add(time.Second)))
	Must(t, err)
	step("Update", u.Revision)
	r, err := s.ReleaseKey(a.ID, func(*model.Task) bool { return true })
	Must(t, err)
	step("ReleaseKey", r.Revision)
	b := Create(t, s, "", model.StatusCompleted, T0)
	step("second Create", b.Revision)
	Must(t, s.Delete(b.ID, Tester))
	step("Delete", s.Revision())
	if n, err := s.Prune(time.Time{}, Tester); err != nil || n != 1 {
		t.Fatalf("Prune = %d, %v; want 1", n, err)
	}
	step("Prune", s.Revision())
	// An Update that changes nothing is no change.
	c := Create(t, s, "", model.StatusWorking, T0)
	step("third Create", c.Revision)
	if _, err := s.Update(c.ID, func(*model.Task) (bool, error) { return false, nil }); err != nil {
		t.Fatal(err)
	}
	if s.Revision() != last {
		t.Fatalf("an Update that changed nothing moved the revision to %d", s.Revision())
	}
	h.CheckContiguous(t, 1, last)
	deleted := 0
	for _, ch := range h.All() {
		if ch.Task == nil {
			deleted++
		}
	}
	if deleted != 2 {
		t.Fatalf("hook heard %d deletions, want 2 (Delete and Prune)", deleted)
	}
}

// A watcher that sets the hook, then takes a Snapshot, while 8 writers
// create, update and delete, ends with exactly the store's records.
func testSnapshotPlusHookIsHistory(t *testing.T, s store.Backend) {
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
					err = s.Delete(mine[0], Tester)
					mine = mine[1:]
				case i%2 == 1 && len(mine) > 0:
					_, err = s.Update(mine[len(mine)-1], func(t *model.Task) (bool, error) {
						t.StatusMessage = fmt.Sprintf("writer %d step %d", w, i)
						return true, nil
					})
				default:
					rec := Intent("", T0)
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
	WaitFor(t, func() bool { return s.Revision() >= 50 })
	var h HookLog
	s.SetCommitHook(h.Hook)
	rev, snap, err := s.Snapshot()
	Must(t, err)
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
	for _, c := range h.All() {
		if c.Rev > rev {
			after = append(after, c)
		}
	}
	// A shared backend may skip a revision whose record was written again
	// before the hook heard it (store.Backend); replaying what it heard
	// must still give the store's records.
	last := rev
	for i, c := range after {
		if c.Rev <= last {
			t.Fatalf("after the snapshot at %d the hook's change %d is at %d, after %d: not in order, or heard twice", rev, i, c.Rev, last)
		}
		last = c.Rev
		if old := held[c.ID]; old != nil && old.Revision >= c.Rev {
			t.Fatalf("change %d of %s is already in the snapshot", c.Rev, c.ID)
		}
		if c.Task == nil {
			delete(held, c.ID)
		} else {
			held[c.ID] = c.Task
		}
	}
	if want := s.Revision(); last != want {
		t.Fatalf("snapshot at %d and the hook's changes reach revision %d, not the store's %d", rev, last, want)
	}
	all, err := s.All()
	Must(t, err)
	if len(all) != len(held) {
		t.Fatalf("watcher holds %d records, the store %d", len(held), len(all))
	}
	for _, r := range all {
		got := held[r.ID]
		if got == nil || got.Revision != r.Revision || got.StatusMessage != r.StatusMessage {
			t.Fatalf("watcher holds %+v for %s, the store %+v", got, r.ID, r)
		}
	}
	if h.Overlapped() {
		t.Error("two hook calls ran at once")
	}
}

func testChangesSinceEachRecordOnceAtLatest(t *testing.T, s store.Backend) {
	var recs []*model.Task
	for range 5 {
		recs = append(recs, Create(t, s, "", model.StatusWorking, T0))
	}
	from := s.Revision()
	var h HookLog
	s.SetCommitHook(h.Hook)
	for i := range 3 {
		_, err := s.Update(recs[0].ID, func(t *model.Task) (bool, error) {
			t.StatusMessage = fmt.Sprint("step ", i)
			return true, nil
		})
		Must(t, err)
	}
	_, err := s.Update(recs[1].ID, MoveTo(model.StatusCompleted, T0.Add(time.Second)))
	Must(t, err)
	Must(t, s.Delete(recs[2].ID, Tester))
	// Deleted, then created again under its id: one change, the record.
	Must(t, s.Delete(recs[3].ID, Tester))
	again := recs[3].Clone()
	again.StatusMessage = "again"
	Must(t, s.Create(again))
	// Created and deleted since: one tombstone.
	gone := Create(t, s, "", model.StatusCalling, T0)
	Must(t, s.Delete(gone.ID, Tester))

	// What the replay must be: the hook's changes, each record's last.
	var want []store.Change
	for _, c := range h.All() {
		want = slices.DeleteFunc(want, func(w store.Change) bool { return w.ID == c.ID })
		want = append(want, c)
	}
	got, upTo, ok, err := s.ChangesSince(from)
	Must(t, err)
	if !ok || upTo != s.Revision() {
		t.Fatalf("ChangesSince(%d): ok %v up to %d; want ok up to %d", from, ok, upTo, s.Revision())
	}
	if fmt.Sprint(RevsOf(got)) != fmt.Sprint(RevsOf(want)) {
		t.Fatalf("ChangesSince(%d) =\n%v\nwant\n%v", from, RevsOf(got), RevsOf(want))
	}
	for _, c := range got {
		if c.Task != nil && (c.Task.Revision != c.Rev || c.Task.ID != c.ID) {
			t.Fatalf("change %d carries %s at revision %d", c.Rev, c.Task.ID, c.Task.Revision)
		}
	}
	if got[len(got)-2].Task.StatusMessage != "again" {
		t.Fatalf("the record created again replays as %+v", got[len(got)-2].Task)
	}
	if cs, upTo, ok, err := s.ChangesSince(s.Revision()); err != nil || !ok || len(cs) != 0 || upTo != s.Revision() {
		t.Fatalf("ChangesSince(now) = %v up to %d, ok %v, %v; want nothing, ok", RevsOf(cs), upTo, ok, err)
	}
	// Everything since a new store: every record once, and the tombstones.
	all, _, ok, err := s.ChangesSince(0)
	Must(t, err)
	if live, dead := CountLive(all); !ok || live != 4 || dead != 2 {
		t.Fatalf("ChangesSince(0): ok %v, %d records and %d tombstones; want 4 and 2", ok, live, dead)
	}
	if _, _, ok, _ := s.ChangesSince(s.Revision() + 1); ok {
		t.Fatal("ChangesSince a revision the store never had is ok")
	}
}

func testHookHearsOnlyCommittedChanges(t *testing.T, s store.Backend) {
	var h HookLog
	s.SetCommitHook(h.Hook)
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
				rec := Intent(key, T0)
				err := s.Create(rec)
				var dup *store.DuplicateKeyError
				switch {
				case errors.As(err, &dup):
					if h.Heard(rec.ID) {
						problems <- "the hook heard a Create that failed: " + rec.ID
					}
					continue
				case err != nil:
					problems <- err.Error()
					return
				}
				committed.Add(1)
				if !h.Heard(rec.ID) {
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
	h.CheckContiguous(t, 1, s.Revision())
}

func testRoundTrip(t *testing.T, s store.Backend) {
	rec := Intent("k1", T0)
	Must(t, s.Create(rec))

	got, err := s.Get(rec.ID)
	Must(t, err)
	if got.ID != rec.ID || got.Tool != "sleep" || got.Status != model.StatusCalling ||
		string(got.Arguments) != `{"seconds":5}` || got.IdempotencyKey != "k1" ||
		!got.CreatedAt.Equal(T0) || len(got.History) != 1 {
		t.Fatalf("Get returned %+v, want the created record", got)
	}
	byKey, err := s.ByKey("k1")
	Must(t, err)
	if byKey.ID != rec.ID {
		t.Fatalf("ByKey = %s, want %s", byKey.ID, rec.ID)
	}

	later := T0.Add(time.Minute)
	updated, err := s.Update(rec.ID, func(t *model.Task) (bool, error) {
		t.TaskID = "srv-1"
		return true, t.MoveTo(model.StatusWorking, "started", later)
	})
	Must(t, err)
	if updated.TaskID != "srv-1" || updated.Status != model.StatusWorking {
		t.Fatalf("Update returned %+v", updated)
	}
	got, err = s.Get(rec.ID)
	Must(t, err)
	if got.TaskID != "srv-1" || got.Status != model.StatusWorking || !got.UpdatedAt.Equal(later) || len(got.History) != 2 {
		t.Fatalf("after Update, Get = %+v", got)
	}
	// The idempotency key still finds the record after an update.
	if byKey, err := s.ByKey("k1"); err != nil || byKey.Status != model.StatusWorking {
		t.Fatalf("ByKey after update = %v, %v", byKey, err)
	}

	Must(t, s.Delete(rec.ID, Tester))
	if _, err := s.Get(rec.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get after Delete: %v, want ErrNotFound", err)
	}
	if _, err := s.ByKey("k1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("ByKey after Delete: %v, want ErrNotFound", err)
	}
	if err := s.Delete(rec.ID, Tester); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second Delete: %v, want ErrNotFound", err)
	}
	if _, err := s.Update(rec.ID, MoveTo(model.StatusCompleted, later)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Update after Delete: %v, want ErrNotFound", err)
	}
	if s.Revision() != 3 {
		t.Fatalf("after a create, an update and a delete the store is at revision %d, want 3", s.Revision())
	}
	// The key is free again.
	Must(t, s.Create(Intent("k1", later)))
}

// A poll that saw nothing new commits nothing: no revision, no hook call.
func testUpdateUnchangedWritesNothing(t *testing.T, s store.Backend) {
	rec := Create(t, s, "k", model.StatusWorking, T0)
	var h HookLog
	s.SetCommitHook(h.Hook)
	rev := s.Revision()
	calls := 0
	got, err := s.Update(rec.ID, func(t *model.Task) (bool, error) {
		calls++
		// It may scribble on its copy, but reports no change.
		t.LastPolledAt = T0.Add(time.Hour)
		return false, nil
	})
	Must(t, err)
	if calls != 1 {
		t.Fatalf("fn ran %d times, want 1", calls)
	}
	if got.Status != model.StatusWorking || !got.LastPolledAt.IsZero() || got.Revision != rec.Revision {
		t.Fatalf("Update returned %+v, want the stored record", got)
	}
	if stored, err := s.Get(rec.ID); err != nil || !stored.LastPolledAt.IsZero() || stored.Revision != rec.Revision {
		t.Fatalf("after an unchanged Update the store holds %+v, %v", stored, err)
	}
	if s.Revision() != rev || len(h.All()) != 0 {
		t.Fatalf("an unchanged Update moved the revision %d → %d and the hook heard %v", rev, s.Revision(), RevsOf(h.All()))
	}
	// A real change does show, so the test can fail.
	_, err = s.Update(rec.ID, MoveTo(model.StatusCompleted, T0.Add(time.Minute)))
	Must(t, err)
	if s.Revision() != rev+1 || len(h.All()) != 1 {
		t.Fatal("a changing Update did not move the revision or reach the hook")
	}
}

// ReleaseKey takes a record's key in one commit: the record stays readable
// throughout, without the key after, and the key may name a new record. A
// record release refuses, or one without a key, is not written.
func testReleaseKey(t *testing.T, s store.Backend) {
	rec := Create(t, s, "k", model.StatusFailed, T0)
	open := Create(t, s, "o", model.StatusWorking, T0)
	before := s.Revision()

	var vanished atomic.Bool
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := s.Get(rec.ID); errors.Is(err, store.ErrNotFound) {
				vanished.Store(true)
			}
		}
	})
	failed := func(r *model.Task) bool { return r.Status == model.StatusFailed }
	got, err := s.ReleaseKey(rec.ID, failed)
	close(stop)
	wg.Wait()
	Must(t, err)
	if vanished.Load() {
		t.Error("a reader found the record gone while its key was released")
	}
	if n := s.Revision() - before; n != 1 {
		t.Errorf("releasing a key took %d revisions, want 1", n)
	}
	stored, err := s.Get(rec.ID)
	Must(t, err)
	if got.IdempotencyKey != "" || stored.IdempotencyKey != "" || stored.Status != model.StatusFailed {
		t.Fatalf("after release: returned key %q, stored key %q status %s; want the failed record without its key", got.IdempotencyKey, stored.IdempotencyKey, stored.Status)
	}
	if _, err := s.ByKey("k"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("ByKey after release: %v; want not found", err)
	}
	Must(t, s.Create(Intent("k", T0)))

	before = s.Revision()
	got, err = s.ReleaseKey(open.ID, failed)
	Must(t, err)
	if got.IdempotencyKey != "o" || s.Revision() != before {
		t.Fatalf("a refused release: key %q, %d revisions; want the key kept and nothing written", got.IdempotencyKey, s.Revision()-before)
	}
	if byKey, err := s.ByKey("o"); err != nil || byKey.ID != open.ID {
		t.Fatalf("ByKey after a refused release: %v, %v", byKey, err)
	}
	if _, err := s.ReleaseKey("no-such-id", func(*model.Task) bool { return true }); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("release of a missing record: %v; want not found", err)
	}
}

// createMany writes n records of status st at time at, with 16 writers.
func createMany(t *testing.T, s store.Backend, n int, st model.Status, at time.Time, keyed bool) {
	t.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Value
	for range 16 {
		wg.Go(func() {
			for i := next.Add(1); i <= int64(n); i = next.Add(1) {
				key := ""
				if keyed {
					key = fmt.Sprintf("many-%s-%d", st, i)
				}
				rec := Intent(key, at)
				rec.Status = st
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

// Prune takes the terminal records older than the cutoff, in more than one
// chunk, with their keys, and never an open record.
func testPrune(t *testing.T, s store.Backend) {
	old, cutoff, recent := T0, T0.Add(time.Hour), T0.Add(2*time.Hour)
	const oldTerminal = 1100
	createMany(t, s, oldTerminal/2, model.StatusCompleted, old, true)
	createMany(t, s, oldTerminal/2, model.StatusUnknown, old, false)
	keep := Create(t, s, "recent", model.StatusFailed, recent)
	var open []*model.Task
	for _, st := range []model.Status{model.StatusCalling, model.StatusWorking, model.StatusInputRequired, model.StatusOrphaned} {
		open = append(open, Create(t, s, "open-"+string(st), st, old)) // old, but never pruned
	}
	var h HookLog
	s.SetCommitHook(h.Hook)
	rev := s.Revision()
	n, err := s.Prune(cutoff, Tester)
	Must(t, err)
	if n != oldTerminal {
		t.Fatalf("Prune deleted %d, want %d", n, oldTerminal)
	}
	if got := s.Revision() - rev; got != oldTerminal {
		t.Fatalf("Prune moved the revision by %d for %d deletions", got, oldTerminal)
	}
	if live, dead := CountLive(h.All()); live != 0 || dead != oldTerminal {
		t.Fatalf("the hook heard %d records and %d deletions, want %d deletions", live, dead, oldTerminal)
	}
	all, err := s.All()
	Must(t, err)
	if want := SortedIDs(append([]*model.Task{keep}, open...)...); !slices.Equal(IDs(all), want) {
		t.Fatalf("after Prune, All has %d records, want the %d recent and open ones", len(all), len(want))
	}
	if _, err := s.ByKey("many-completed-1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a pruned record's idempotency key: %v, want not found", err)
	}
	Must(t, s.Create(Intent("many-completed-1", recent)))
	if n, err := s.Prune(cutoff, Tester); err != nil || n != 0 {
		t.Fatalf("second Prune = %d, %v; want 0, nil", n, err)
	}
	if n, err := s.Prune(time.Time{}, Tester); err != nil || n != 1 {
		t.Fatalf("Prune(zero) = %d, %v; want 1 (the recent failed one)", n, err)
	}
	counts, err := s.Counts()
	Must(t, err)
	if len(counts) != 4 || counts[model.StatusCalling] != 2 {
		t.Fatalf("Counts after pruning = %v, want the open records only", counts)
	}
}

// Eight writers create under ten shared keys and update what they made:
// each key ends with exactly one record, the one its single winner made.
func testConcurrentWritersOneRecordPerKey(t *testing.T, s store.Backend) {
	const writers, each, keys = 8, 30, 10
	var wg sync.WaitGroup
	var mu sync.Mutex
	won := map[string]string{} // key → id of the Create that succeeded
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				key := fmt.Sprint("shared-", (w+i)%keys)
				rec := Intent(key, T0)
				err := s.Create(rec)
				var dup *store.DuplicateKeyError
				switch {
				case errors.As(err, &dup):
					continue
				case err != nil:
					errs <- err
					return
				}
				mu.Lock()
				if prev, ok := won[key]; ok {
					errs <- fmt.Errorf("key %s won twice: %s and %s", key, prev, rec.ID)
				}
				won[key] = rec.ID
				mu.Unlock()
				if _, err := s.Update(rec.ID, func(t *model.Task) (bool, error) {
					t.StatusMessage = fmt.Sprint("writer ", w)
					return true, nil
				}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	all, err := s.All()
	Must(t, err)
	if len(all) != keys || len(won) != keys {
		t.Fatalf("%d records and %d winners for %d keys, want one each", len(all), len(won), keys)
	}
	for key, id := range won {
		if got, err := s.ByKey(key); err != nil || got.ID != id || got.StatusMessage == "" {
			t.Fatalf("ByKey(%s) = %+v, %v; want the winner %s, updated", key, got, err, id)
		}
	}
}

// A closed store refuses calls with an error, not a panic.
func testClosedRefusesCalls(t *testing.T, s store.Backend) {
	rec := Create(t, s, "", model.StatusWorking, T0)
	Must(t, s.Close())
	if _, err := s.Get(rec.ID); err == nil {
		t.Fatal("Get on a closed store succeeded")
	}
	if err := s.Create(Intent("", T0)); err == nil {
		t.Fatal("Create on a closed store succeeded")
	}
	if _, _, err := s.Snapshot(); err == nil {
		t.Fatal("Snapshot on a closed store succeeded")
	}
}

// testWindowAndPages checks that a watcher's window holds every open
// record, the newest finished ones and the counts of the whole store, all
// as of one revision, and that pages walk the rest newest first, by status
// from the index.
func testWindowAndPages(t *testing.T, s store.Backend) {
	var done, failed, open []*model.Task
	for i := range 12 {
		at := T0.Add(time.Duration(i) * time.Second)
		switch i % 4 {
		case 0:
			open = append(open, Create(t, s, "", model.StatusWorking, at))
		case 1:
			failed = append(failed, Create(t, s, "", model.StatusFailed, at))
		default:
			done = append(done, Create(t, s, "", model.StatusCompleted, at))
		}
	}
	finished := append(append([]*model.Task{}, done...), failed...)
	newestFirst := func(ts []*model.Task) []string {
		ids := SortedIDs(ts...)
		slices.Reverse(ids)
		return ids
	}
	w, err := s.Window(4)
	Must(t, err)
	if w.Rev != s.Revision() {
		t.Errorf("Window rev = %d, the store's is %d", w.Rev, s.Revision())
	}
	if !slices.Equal(IDs(w.Open), SortedIDs(open...)) {
		t.Errorf("Window open = %v, want %v", IDs(w.Open), SortedIDs(open...))
	}
	if want := newestFirst(finished)[:4]; !slices.Equal(IDs(w.Finished), want) {
		t.Errorf("Window finished = %v, want the newest 4 %v", IDs(w.Finished), want)
	}
	want := map[model.Status]int{model.StatusWorking: 3, model.StatusFailed: 3, model.StatusCompleted: 6}
	if fmt.Sprint(w.Counts) != fmt.Sprint(want) {
		t.Errorf("Window counts = %v, want %v", w.Counts, want)
	}
	if rev, counts, err := s.CountsAt(); err != nil || rev != w.Rev || fmt.Sprint(counts) != fmt.Sprint(want) {
		t.Errorf("CountsAt = %d, %v, %v; want %d, %v", rev, counts, err, w.Rev, want)
	}

	// Pages of 2 from the newest reach every record once, in order.
	var walked []*model.Task
	before := ""
	for {
		p, err := s.Page(before, 2)
		Must(t, err)
		if len(p) == 0 {
			break
		}
		walked = append(walked, p...)
		before = p[len(p)-1].ID
	}
	all := append(append([]*model.Task{}, finished...), open...)
	if !slices.Equal(IDs(walked), newestFirst(all)) {
		t.Errorf("Page walk = %v, want %v", IDs(walked), newestFirst(all))
	}
	// By status: merged from the statuses' index, newest first, after before.
	p, err := s.Page(w.Finished[1].ID, 100, model.StatusFailed, model.StatusCompleted)
	Must(t, err)
	if want := newestFirst(finished)[2:]; !slices.Equal(IDs(p), want) {
		t.Errorf("Page(finished) after %s = %v, want %v", w.Finished[1].ID, IDs(p), want)
	}
	p, err = s.Page("", 2, model.StatusFailed)
	Must(t, err)
	if want := newestFirst(failed)[:2]; !slices.Equal(IDs(p), want) {
		t.Errorf("Page(failed) = %v, want %v", IDs(p), want)
	}

	// Counts follow every change: a move, a delete, a prune.
	_, err = s.Update(open[0].ID, MoveTo(model.StatusCompleted, T0.Add(time.Minute)))
	Must(t, err)
	Must(t, s.Delete(failed[0].ID, Tester))
	want = map[model.Status]int{model.StatusWorking: 2, model.StatusFailed: 2, model.StatusCompleted: 7}
	counts, err := s.Counts()
	Must(t, err)
	if fmt.Sprint(counts) != fmt.Sprint(want) {
		t.Errorf("Counts after a move and a delete = %v, want %v", counts, want)
	}
	_, err = s.Prune(time.Time{}, Tester)
	Must(t, err)
	w, err = s.Window(10)
	Must(t, err)
	if want := map[model.Status]int{model.StatusWorking: 2}; fmt.Sprint(w.Counts) != fmt.Sprint(want) || len(w.Finished) != 0 {
		t.Errorf("after Prune: counts %v, %d finished, want %v and none", w.Counts, len(w.Finished), want)
	}
}
