package store_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func openStore(t *testing.T, dir string) *store.Store {
	t.Helper()
	s, err := store.Open(dir, nil)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		// Tests that close the store themselves make this a no-op error.
		_ = s.Close()
	})
	return s
}

func newStore(t *testing.T) *store.Store { return openStore(t, t.TempDir()) }

func intent(key string, now time.Time) *model.Task {
	return model.NewIntent(model.ServerRef{Name: "demo"}, "sleep", json.RawMessage(`{"seconds":5}`), key, now)
}

// create stores a record that has reached st through legal moves.
func create(t *testing.T, s *store.Store, key string, st model.Status, now time.Time) *model.Task {
	t.Helper()
	rec := intent(key, now)
	if st != model.StatusCalling {
		if st != model.StatusOrphaned {
			must(t, rec.MoveTo(model.StatusWorking, "", now))
		}
		must(t, rec.MoveTo(st, "", now))
	}
	must(t, s.Create(rec))
	return rec
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func ids(ts []*model.Task) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.ID)
	}
	return out
}

func sortedIDs(ts ...*model.Task) []string {
	out := ids(ts)
	slices.Sort(out)
	return out
}

func moveTo(st model.Status, at time.Time) func(*model.Task) (bool, error) {
	return func(t *model.Task) (bool, error) {
		if t.Status == st {
			return false, nil
		}
		return true, t.MoveTo(st, "", at)
	}
}

func TestRoundTrip(t *testing.T) {
	s := newStore(t)
	rec := intent("k1", t0)
	must(t, s.Create(rec))

	got, err := s.Get(rec.ID)
	must(t, err)
	if got.ID != rec.ID || got.Tool != "sleep" || got.Status != model.StatusCalling ||
		string(got.Arguments) != `{"seconds":5}` || got.IdempotencyKey != "k1" ||
		!got.CreatedAt.Equal(t0) || len(got.History) != 1 {
		t.Fatalf("Get returned %+v, want the created record", got)
	}
	byKey, err := s.ByKey("k1")
	must(t, err)
	if byKey.ID != rec.ID {
		t.Fatalf("ByKey = %s, want %s", byKey.ID, rec.ID)
	}

	later := t0.Add(time.Minute)
	updated, err := s.Update(rec.ID, func(t *model.Task) (bool, error) {
		t.TaskID = "srv-1"
		return true, t.MoveTo(model.StatusWorking, "started", later)
	})
	must(t, err)
	if updated.TaskID != "srv-1" || updated.Status != model.StatusWorking {
		t.Fatalf("Update returned %+v", updated)
	}
	got, err = s.Get(rec.ID)
	must(t, err)
	if got.TaskID != "srv-1" || got.Status != model.StatusWorking || !got.UpdatedAt.Equal(later) || len(got.History) != 2 {
		t.Fatalf("after Update, Get = %+v", got)
	}
	// The idempotency key still finds the record after an update.
	if byKey, err := s.ByKey("k1"); err != nil || byKey.Status != model.StatusWorking {
		t.Fatalf("ByKey after update = %v, %v", byKey, err)
	}

	must(t, s.Delete(rec.ID))
	if _, err := s.Get(rec.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get after Delete: %v, want ErrNotFound", err)
	}
	if _, err := s.ByKey("k1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("ByKey after Delete: %v, want ErrNotFound", err)
	}
	if err := s.Delete(rec.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second Delete: %v, want ErrNotFound", err)
	}
	if _, err := s.Update(rec.ID, moveTo(model.StatusCompleted, later)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Update after Delete: %v, want ErrNotFound", err)
	}
	// Nothing is left behind but the schema version, the revision record
	// and the deletion's tombstone, at the store's third revision.
	keys, err := store.Keys(s)
	must(t, err)
	if !slices.Equal(keys, []string{"d\x00\x00\x00\x00\x00\x00\x00\x00\x03", "n\x00", "v\x00"}) {
		t.Fatalf("keys after Delete = %q", keys)
	}
	// The key is free again.
	must(t, s.Create(intent("k1", later)))
}

func TestIndexesFollowStatus(t *testing.T) {
	s := newStore(t)
	a := create(t, s, "a", model.StatusCalling, t0)
	b := create(t, s, "", model.StatusCalling, t0)
	c := create(t, s, "c", model.StatusCalling, t0)
	d := create(t, s, "", model.StatusCalling, t0)

	at := t0.Add(time.Second)
	steps := []struct {
		rec *model.Task
		to  model.Status
	}{
		{a, model.StatusWorking}, {b, model.StatusWorking}, {c, model.StatusOrphaned},
		{a, model.StatusInputRequired}, {b, model.StatusCompleted}, {a, model.StatusWorking},
		{a, model.StatusFailed}, {d, model.StatusInputRequired},
	}
	for _, step := range steps {
		_, err := s.Update(step.rec.ID, moveTo(step.to, at))
		must(t, err)
	}
	// a failed, b completed, c orphaned, d input_required.
	wantCounts := map[model.Status]int{
		model.StatusFailed: 1, model.StatusCompleted: 1, model.StatusOrphaned: 1, model.StatusInputRequired: 1,
	}
	counts, err := s.Counts()
	must(t, err)
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
		must(t, err)
		if !slices.Equal(ids(got), want) {
			t.Errorf("ByStatus(%s) = %v, want %v", st, ids(got), want)
		}
		for _, rec := range got {
			if rec.Status != st {
				t.Errorf("ByStatus(%s) returned a %s record", st, rec.Status)
			}
		}
	}
	both, err := s.ByStatus(model.StatusFailed, model.StatusCompleted, model.StatusFailed)
	must(t, err)
	if !slices.Equal(ids(both), sortedIDs(a, b)) {
		t.Errorf("ByStatus(failed, completed, failed) = %v, want %v", ids(both), sortedIDs(a, b))
	}
	open, err := s.OpenTasks()
	must(t, err)
	if !slices.Equal(ids(open), sortedIDs(c, d)) {
		t.Errorf("OpenTasks = %v, want %v (orphaned and input_required)", ids(open), sortedIDs(c, d))
	}
	all, err := s.All()
	must(t, err)
	if !slices.Equal(ids(all), sortedIDs(a, b, c, d)) {
		t.Errorf("All = %v, want %v", ids(all), sortedIDs(a, b, c, d))
	}

	must(t, s.Delete(b.ID))
	counts, err = s.Counts()
	must(t, err)
	if counts[model.StatusCompleted] != 0 || len(counts) != 3 {
		t.Fatalf("Counts after deleting the completed record = %v", counts)
	}
	if got, _ := s.ByStatus(model.StatusCompleted); len(got) != 0 {
		t.Fatalf("ByStatus(completed) after Delete = %v", ids(got))
	}
}

func TestAllIsSortedByCreation(t *testing.T) {
	s := newStore(t)
	var want []string
	for i := range 5 {
		rec := intent("", t0.Add(time.Duration(4-i)*time.Hour)) // created newest first
		must(t, s.Create(rec))
		want = append([]string{rec.ID}, want...)
	}
	all, err := s.All()
	must(t, err)
	if !slices.Equal(ids(all), want) {
		t.Fatalf("All = %v, want oldest first %v", ids(all), want)
	}
}

func TestCreateRefusesBadRecords(t *testing.T) {
	s := newStore(t)
	rec := intent("", t0)
	must(t, s.Create(rec))
	if err := s.Create(rec); err == nil {
		t.Fatal("Create of an existing id succeeded")
	}
	bad := intent("", t0)
	bad.Status = "sleeping"
	if err := s.Create(bad); err == nil {
		t.Fatal("Create with an unknown status succeeded")
	}
	bad = intent("", t0)
	bad.ID = ""
	if err := s.Create(bad); err == nil {
		t.Fatal("Create without an id succeeded")
	}
	all, err := s.All()
	must(t, err)
	if len(all) != 1 {
		t.Fatalf("%d records after refused creates, want 1", len(all))
	}
}

func TestDuplicateKey(t *testing.T) {
	s := newStore(t)
	first := intent("same", t0)
	must(t, s.Create(first))
	before := store.Writes(s)

	err := s.Create(intent("same", t0.Add(time.Second)))
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
	if store.Writes(s) != before {
		t.Fatal("a refused Create committed a write")
	}
	all, err := s.All()
	must(t, err)
	if len(all) != 1 {
		t.Fatalf("%d records, want 1", len(all))
	}
}

// Eight creates race on one key, over several rounds because a single
// round often serialises by chance: exactly one wins each round.
func TestConcurrentCreateOneKeyOneWinner(t *testing.T) {
	s := newStore(t)
	const n, rounds = 8, 20
	for round := range rounds {
		key := fmt.Sprintf("race-%d", round)
		recs := make([]*model.Task, n)
		errs := make([]error, n)
		for i := range recs {
			recs[i] = intent(key, t0)
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
	must(t, err)
	if len(all) != rounds {
		t.Fatalf("%d records after %d rounds, want one per round", len(all), rounds)
	}
}

func TestUpdateUnchangedWritesNothing(t *testing.T) {
	s := newStore(t)
	rec := create(t, s, "k", model.StatusWorking, t0)
	writes, version := store.Writes(s), store.MaxVersion(s)

	calls := 0
	got, err := s.Update(rec.ID, func(t *model.Task) (bool, error) {
		calls++
		// A poll that saw nothing new: it may scribble on its copy,
		// but reports no change, so none of this is kept.
		t.LastPolledAt = t0.Add(time.Hour)
		return false, nil
	})
	must(t, err)
	if calls != 1 {
		t.Fatalf("fn ran %d times, want 1", calls)
	}
	if got.Status != model.StatusWorking || !got.LastPolledAt.IsZero() {
		t.Fatalf("Update returned %+v, want the stored record", got)
	}
	if w := store.Writes(s); w != writes {
		t.Fatalf("unchanged Update committed %d write txns", w-writes)
	}
	if v := store.MaxVersion(s); v != version {
		t.Fatalf("Badger's commit timestamp moved from %d to %d", version, v)
	}

	// The same counters do move for a real change, so the test can fail.
	_, err = s.Update(rec.ID, moveTo(model.StatusCompleted, t0.Add(time.Minute)))
	must(t, err)
	if store.Writes(s) != writes+1 || store.MaxVersion(s) == version {
		t.Fatal("a changing Update did not show up in the counters")
	}
}

func TestUpdateErrorWritesNothing(t *testing.T) {
	s := newStore(t)
	rec := create(t, s, "k", model.StatusWorking, t0)
	writes := store.Writes(s)

	// An illegal move (working → calling) fails in model; fn passes it on.
	_, err := s.Update(rec.ID, moveTo(model.StatusCalling, t0.Add(time.Minute)))
	var te *model.TransitionError
	if !errors.As(err, &te) {
		t.Fatalf("Update: %v, want the TransitionError from fn", err)
	}
	if store.Writes(s) != writes {
		t.Fatal("a failed Update committed a write")
	}
	got, err := s.Get(rec.ID)
	must(t, err)
	if got.Status != model.StatusWorking || len(got.History) != len(rec.History) {
		t.Fatalf("record changed by a failed Update: %+v", got)
	}
	counts, err := s.Counts()
	must(t, err)
	if counts[model.StatusWorking] != 1 || len(counts) != 1 {
		t.Fatalf("Counts = %v", counts)
	}
}

func TestUpdateMayNotChangeIdentity(t *testing.T) {
	s := newStore(t)
	rec := create(t, s, "k", model.StatusWorking, t0)
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
func TestConcurrentUpdatesAreNotLost(t *testing.T) {
	s := newStore(t)
	rec := create(t, s, "", model.StatusInputRequired, t0)
	const writers, each = 4, 10
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				_, err := s.Update(rec.ID, func(t *model.Task) (bool, error) {
					t.MarkAnswered([]string{fmt.Sprintf("w%d-%d", w, i)}, t0)
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
	must(t, err)
	if len(got.AnsweredKeys) != writers*each {
		t.Fatalf("%d answered keys kept, want %d", len(got.AnsweredKeys), writers*each)
	}
}

func TestUndecodableRecordIsAnErrorNamingIt(t *testing.T) {
	s := newStore(t)
	good := create(t, s, "", model.StatusWorking, t0)
	const badID = "0000000000000000"
	must(t, store.PutRaw(s, "t\x00"+badID, "{not json"))
	must(t, store.PutRaw(s, "s\x00completed\x00"+badID, "\x01"))

	if _, err := s.Get(badID); err == nil || errors.Is(err, store.ErrNotFound) || !strings.Contains(err.Error(), badID) {
		t.Fatalf("Get of a damaged record: %v, want an error naming %s", err, badID)
	}
	if _, err := s.All(); err == nil || !strings.Contains(err.Error(), badID) {
		t.Fatalf("All: %v, want an error naming %s", err, badID)
	}
	if _, err := s.ByStatus(model.StatusCompleted); err == nil {
		t.Fatal("ByStatus(completed) skipped the damaged record")
	}
	if _, err := s.Prune(time.Time{}); err == nil {
		t.Fatal("Prune skipped the damaged record")
	}
	// Queries for other statuses never read it.
	open, err := s.OpenTasks()
	must(t, err)
	if !slices.Equal(ids(open), []string{good.ID}) {
		t.Fatalf("OpenTasks = %v", ids(open))
	}
	counts, err := s.Counts()
	must(t, err)
	if counts[model.StatusCompleted] != 1 || counts[model.StatusWorking] != 1 {
		t.Fatalf("Counts = %v", counts)
	}
}

func TestNewestReadsTheLatestRecords(t *testing.T) {
	s := openStore(t, t.TempDir())
	var ids []string
	for i := range 30 {
		rec := create(t, s, "", model.StatusCompleted, t0.Add(time.Duration(i)*time.Second))
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

// An open record lives in its status index entry, where start-up lists
// it; every change and every way of reading must find it there, and a
// store in the version 1 layout must still read in full.
func TestOpenTasksFollowEveryChange(t *testing.T) {
	s := newStore(t)
	rec := create(t, s, "k", model.StatusWorking, t0)
	listed := func() *model.Task {
		t.Helper()
		open, err := s.OpenTasks()
		must(t, err)
		for _, o := range open {
			if o.ID == rec.ID {
				return o
			}
		}
		return nil
	}
	_, err := s.Update(rec.ID, func(r *model.Task) (bool, error) { r.StatusMessage = "half way"; return true, nil })
	must(t, err)
	if got := listed(); got == nil || got.StatusMessage != "half way" {
		t.Fatalf("after a message change OpenTasks lists %+v", got)
	}
	// Every other way in finds the open record where it lives.
	if got, err := s.Get(rec.ID); err != nil || got.StatusMessage != "half way" {
		t.Fatalf("Get of an open record = %+v, %v", got, err)
	}
	if got, err := s.ByKey("k"); err != nil || got.StatusMessage != "half way" {
		t.Fatalf("ByKey of an open record = %+v, %v", got, err)
	}
	if all, err := s.All(); err != nil || len(all) != 1 || all[0].StatusMessage != "half way" {
		t.Fatalf("All = %+v, %v", all, err)
	}
	if newest, err := s.Newest(5); err != nil || len(newest) != 1 || newest[0].StatusMessage != "half way" {
		t.Fatalf("Newest = %+v, %v", newest, err)
	}
	_, err = s.Update(rec.ID, func(r *model.Task) (bool, error) {
		return true, r.MoveTo(model.StatusInputRequired, "need a name", t0.Add(time.Second))
	})
	must(t, err)
	if got := listed(); got == nil || got.Status != model.StatusInputRequired || len(got.History) != 3 {
		t.Fatalf("after a move OpenTasks lists %+v", got)
	}
	_, err = s.Update(rec.ID, func(r *model.Task) (bool, error) {
		return true, r.MoveTo(model.StatusCompleted, "done", t0.Add(2*time.Second))
	})
	must(t, err)
	if got := listed(); got != nil {
		t.Fatalf("a completed task is still listed as open: %+v", got)
	}
	done, err := s.ByStatus(model.StatusCompleted)
	must(t, err)
	if len(done) != 1 || done[0].StatusMessage != "half way" || len(done[0].History) != 4 {
		t.Fatalf("ByStatus(completed) = %+v", done)
	}

	// Schema version 1: an open record under its record key, the mark in
	// its index entry. It reads as it is, and its next change moves it.
	old := create(t, s, "", model.StatusWorking, t0)
	oldJSON, _ := json.Marshal(old)
	must(t, store.PutRaw(s, "t\x00"+old.ID, string(oldJSON)))
	must(t, store.PutRaw(s, "s\x00working\x00"+old.ID, "\x01"))
	open, err := s.OpenTasks()
	must(t, err)
	if len(open) != 1 || open[0].ID != old.ID || open[0].Tool != old.Tool || !open[0].CreatedAt.Equal(old.CreatedAt) {
		t.Fatalf("OpenTasks with an entry in the old layout = %+v", open)
	}
	_, err = s.Update(old.ID, func(r *model.Task) (bool, error) { r.StatusMessage = "moved"; return true, nil })
	must(t, err)
	if got, err := s.Get(old.ID); err != nil || got.StatusMessage != "moved" {
		t.Fatalf("Get after updating an old-layout record = %+v, %v", got, err)
	}
	if open, err := s.OpenTasks(); err != nil || len(open) != 1 || open[0].StatusMessage != "moved" {
		t.Fatalf("OpenTasks after updating an old-layout record = %+v, %v", open, err)
	}
	// A damaged record in an index entry is an error naming the task, not
	// a silent skip.
	must(t, store.PutRaw(s, "s\x00working\x00"+old.ID, "{not json"))
	if _, err := s.OpenTasks(); err == nil || !strings.Contains(err.Error(), old.ID) {
		t.Fatalf("OpenTasks over a damaged entry: %v, want an error naming %s", err, old.ID)
	}
	if _, err := s.Get(old.ID); err == nil || !strings.Contains(err.Error(), old.ID) {
		t.Fatalf("Get over a damaged entry: %v, want an error naming %s", err, old.ID)
	}
}

// Two damaged records still make one line, naming the first.
func TestDamagedRecordsAreOneLine(t *testing.T) {
	s := newStore(t)
	for _, id := range []string{"0000000000000001", "0000000000000002"} {
		must(t, store.PutRaw(s, "s\x00working\x00"+id, "{not json"))
		must(t, store.PutRaw(s, "t\x00"+id, "\x00working"))
	}
	_, err := s.OpenTasks()
	if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "0000000000000001") || !strings.Contains(err.Error(), "1 more") {
		t.Fatalf("OpenTasks over two damaged records: %q, want one line naming the first and counting the other", err)
	}
}

// Quitting while polls still read and write: Close waits for the reads
// and commits in flight (a read that overlaps Badger's Close would panic),
// every write that reported success is there at the next Open, and what
// comes after Close is refused with a line that says so.
func TestCloseWhileReadingAndWriting(t *testing.T) {
	for range 5 {
		closeWhileBusy(t)
	}
}

func closeWhileBusy(t *testing.T) {
	dir := t.TempDir()
	s, err := store.Open(dir, nil)
	must(t, err)
	var (
		mu    sync.Mutex
		saved []string
		wg    sync.WaitGroup
	)
	// stopped: Close refused the call; any other error is a failure.
	stopped := func(err error) bool {
		if err != nil && !strings.Contains(err.Error(), "is closed") {
			t.Errorf("during Close: %v", err)
		}
		return err != nil
	}
	busy := make(chan struct{}, 12)
	for range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				rec := intent("", t0)
				if stopped(s.Create(rec)) {
					return
				}
				mu.Lock()
				saved = append(saved, rec.ID)
				mu.Unlock()
				if i == 0 {
					busy <- struct{}{}
				}
			}
		})
	}
	for range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				if _, err := s.All(); stopped(err) {
					return
				}
				if i == 0 {
					busy <- struct{}{}
				}
			}
		})
	}
	for range 12 {
		<-busy
	}
	must(t, s.Close())
	wg.Wait()
	s = openStore(t, dir)
	all, err := s.All()
	must(t, err)
	if len(all) != len(saved) || len(saved) == 0 {
		t.Fatalf("%d writes reported success, %d records after reopening", len(saved), len(all))
	}
}

// Start-up lists the open tasks in batches decoded while the rest are
// read: several batches' worth, of every open status, come back whole,
// once each, sorted by ID, and no finished record among them.
func TestOpenTasksListsEveryOpenRecord(t *testing.T) {
	s := newStore(t)
	open := []model.Status{model.StatusCalling, model.StatusWorking, model.StatusInputRequired, model.StatusOrphaned}
	var want []*model.Task
	for i := range 1000 {
		at := t0.Add(time.Duration(i) * time.Millisecond)
		if i%5 == 4 {
			create(t, s, "", model.StatusCompleted, at)
			continue
		}
		want = append(want, create(t, s, "", open[i%4], at))
	}
	got, err := s.OpenTasks()
	must(t, err)
	if !slices.Equal(ids(got), sortedIDs(want...)) {
		t.Fatalf("OpenTasks listed %d records, want the %d open ones in ID order", len(got), len(want))
	}
	byID := map[string]*model.Task{}
	for _, w := range want {
		byID[w.ID] = w
	}
	for _, g := range got {
		w := byID[g.ID]
		if g.Status != w.Status || len(g.History) != len(w.History) || !g.History[len(g.History)-1].At.Equal(w.History[len(w.History)-1].At) {
			t.Fatalf("task %s listed as %s with history %+v, stored as %s with %+v", g.ID, g.Status, g.History, w.Status, w.History)
		}
	}
}
