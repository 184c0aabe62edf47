package badger_test

import (
	"bytes"
	"encoding/binary"
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
	"github.com/taskdeck/taskdeck/store/badger"
	"github.com/taskdeck/taskdeck/store/storetest"
)

// The helpers the contract suite shares with Badger's own tests.
var (
	t0        = storetest.T0
	intent    = storetest.Intent
	tester    = storetest.Tester
	create    = storetest.Create
	must      = storetest.Must
	ids       = storetest.IDs
	sortedIDs = storetest.SortedIDs
	moveTo    = storetest.MoveTo
)

func openStore(t *testing.T, dir string) *badger.Store {
	t.Helper()
	s, err := badger.Open(dir, nil)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		// Tests that close the store themselves make this a no-op error.
		_ = s.Close()
	})
	return s
}

func newStore(t *testing.T) *badger.Store { return openStore(t, t.TempDir()) }

// A deleted record leaves nothing behind but the schema version, the
// revision record, its tombstone, the counts per status and the audit
// entries of its changes.
func TestDeleteLeavesOnlyItsTombstone(t *testing.T) {
	s := newStore(t)
	rec := intent("k1", t0)
	must(t, s.Create(rec))
	_, err := s.Update(rec.ID, moveTo(model.StatusWorking, t0.Add(time.Minute)))
	must(t, err)
	must(t, s.Delete(rec.ID, tester))
	keys, err := badger.Keys(s)
	must(t, err)
	audit := []string{"a\x00\x00\x00\x00\x00\x00\x00\x00\x01", "a\x00\x00\x00\x00\x00\x00\x00\x00\x02", "a\x00\x00\x00\x00\x00\x00\x00\x00\x03"}
	if !slices.Equal(keys, append(audit, "d\x00\x00\x00\x00\x00\x00\x00\x00\x03", "m\x00", "n\x00", "v\x00")) {
		t.Fatalf("keys after Delete = %q", keys)
	}
}

func TestUpdateUnchangedWritesNothing(t *testing.T) {
	s := newStore(t)
	rec := create(t, s, "k", model.StatusWorking, t0)
	writes, version := badger.Writes(s), badger.MaxVersion(s)

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
	if w := badger.Writes(s); w != writes {
		t.Fatalf("unchanged Update committed %d write txns", w-writes)
	}
	if v := badger.MaxVersion(s); v != version {
		t.Fatalf("Badger's commit timestamp moved from %d to %d", version, v)
	}

	// The same counters do move for a real change, so the test can fail.
	_, err = s.Update(rec.ID, moveTo(model.StatusCompleted, t0.Add(time.Minute)))
	must(t, err)
	if badger.Writes(s) != writes+1 || badger.MaxVersion(s) == version {
		t.Fatal("a changing Update did not show up in the counters")
	}
}

func TestUndecodableRecordIsAnErrorNamingIt(t *testing.T) {
	s := newStore(t)
	good := create(t, s, "", model.StatusWorking, t0)
	const badID = "0000000000000000"
	must(t, badger.PutRaw(s, "t\x00"+badID, "{not json"))
	must(t, badger.PutRaw(s, "s\x00completed\x00"+badID, "\x01"))

	if _, err := s.Get(badID); err == nil || errors.Is(err, store.ErrNotFound) || !strings.Contains(err.Error(), badID) {
		t.Fatalf("Get of a damaged record: %v, want an error naming %s", err, badID)
	}
	if _, err := s.All(); err == nil || !strings.Contains(err.Error(), badID) {
		t.Fatalf("All: %v, want an error naming %s", err, badID)
	}
	if _, err := s.ByStatus(model.StatusCompleted); err == nil {
		t.Fatal("ByStatus(completed) skipped the damaged record")
	}
	if _, err := s.Prune(time.Time{}, tester); err == nil {
		t.Fatal("Prune skipped the damaged record")
	}
	// Queries for other statuses never read it.
	open, err := s.OpenTasks()
	must(t, err)
	if !slices.Equal(ids(open), []string{good.ID}) {
		t.Fatalf("OpenTasks = %v", ids(open))
	}
	// The counts are what the commits wrote: they read no record, and
	// the damage planted behind the store's back is none of theirs.
	counts, err := s.Counts()
	must(t, err)
	if counts[model.StatusWorking] != 1 {
		t.Fatalf("Counts = %v", counts)
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
	must(t, badger.PutRaw(s, "t\x00"+old.ID, string(oldJSON)))
	must(t, badger.PutRaw(s, "s\x00working\x00"+old.ID, "\x01"))
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
	must(t, badger.PutRaw(s, "s\x00working\x00"+old.ID, "{not json"))
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
		must(t, badger.PutRaw(s, "s\x00working\x00"+id, "{not json"))
		must(t, badger.PutRaw(s, "t\x00"+id, "\x00working"))
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
	s, err := badger.Open(dir, nil)
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

// The counts per status survive a reopen, and a store whose counts are
// missing or older than its records (written by older code) is counted
// again from its status index at open, then kept by every commit.
func TestCountsOfAnOlderStoreAreRecounted(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	for i := range 5 {
		rec := intent("", t0.Add(time.Duration(i)*time.Second))
		must(t, s.Create(rec))
		if i%2 == 0 {
			_, err := s.Update(rec.ID, moveTo(model.StatusWorking, t0.Add(time.Minute)))
			must(t, err)
		}
	}
	want := map[model.Status]int{model.StatusCalling: 2, model.StatusWorking: 3}
	check := func(when string) {
		t.Helper()
		counts, err := s.Counts()
		must(t, err)
		if fmt.Sprint(counts) != fmt.Sprint(want) {
			t.Fatalf("%s: Counts = %v, want %v", when, counts, want)
		}
	}
	check("as written")
	must(t, s.Close())
	s = openStore(t, dir)
	check("after a reopen")
	must(t, badger.DeleteRaw(s, "m\x00"))
	must(t, s.Close())
	s = openStore(t, dir)
	check("after a reopen without the counts")
	must(t, s.Create(intent("", t0.Add(time.Hour))))
	want[model.StatusCalling]++
	check("after a commit on the recount")
	// Counts written at an older revision than the records': recounted.
	must(t, badger.PutRaw(s, "m\x00", string(make([]byte, 8*(1+len(model.AllStatuses))))))
	check("with counts of revision 0")
	// Counts of the layout before the found and left statuses (8 counts),
	// as new as the records: recounted, not refused as damaged.
	older := binary.BigEndian.AppendUint64(nil, s.Revision())
	older = append(older, bytes.Repeat([]byte{0, 0, 0, 0, 0, 0, 0, 9}, 8)...)
	must(t, badger.PutRaw(s, "m\x00", string(older)))
	check("with counts of 8 statuses")
}
