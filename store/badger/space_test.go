//go:build unix

package badger_test

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store/badger"
)

// TestRewritesOfLargeRecordsStayBounded: ten open records with 100 KB of
// arguments, each rewritten 100 times with a new status message (a poll
// that brings progress). Every copy went to the value log and stayed
// there: 100 MB on disk for 1 MB of records. Now the data directory stays
// within three times the live records at every sample, and Prune gives
// the space back at once, without a reopen. While each rewrite copied
// the arguments, Badger's working set (memtable WALs, a level-0 table,
// copies compaction has not reached yet) needed an allowance of its own:
// 30 MiB for 1 MiB of records at 8 MiB memtables, 4 MiB beside 3× at 1
// MiB ones. Kept apart, the arguments are written once.
func TestRewritesOfLargeRecordsStayBounded(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	recs := make([]*model.Task, 10)
	for i := range recs {
		recs[i] = largeRecord(t, s, 100<<10)
	}
	const rounds = 100
	for round := range rounds {
		var wg sync.WaitGroup
		for _, rec := range recs {
			wg.Go(func() { progress(t, s, rec.ID, round) })
		}
		wg.Wait()
		if round%10 == 9 {
			live, disk := liveBytes(t, s), diskUsage(t, dir)
			if disk > 3*live {
				t.Fatalf("after %d rewrites of each record the store takes %d KiB on disk for %d KiB of records", round+1, disk>>10, live>>10)
			}
		}
	}
	before := diskUsage(t, dir)
	// Half of them end and are pruned: the rest must fit in 1.5 times
	// their size (plus the few KiB of Badger's small files).
	for _, rec := range recs[:5] {
		_, err := s.Update(rec.ID, moveTo(model.StatusCompleted, time.Now()))
		must(t, err)
	}
	if n, err := s.Prune(time.Time{}, tester); err != nil || n != 5 {
		t.Fatalf("pruned %d: %v", n, err)
	}
	live, disk := liveBytes(t, s), diskUsage(t, dir)
	t.Logf("before prune %d KiB on disk; after: %d KiB for %d KiB of records", before>>10, disk>>10, live>>10)
	if disk > live*3/2+64<<10 {
		t.Fatalf("after Prune the store takes %d KiB on disk for %d KiB of records", disk>>10, live>>10)
	}
	for _, rec := range recs[5:] {
		got, err := s.Get(rec.ID)
		must(t, err)
		if got.StatusMessage != fmt.Sprint("progress ", rounds-1) || string(got.Arguments) != string(rec.Arguments) {
			t.Fatalf("record %s changed: %q", rec.ID, got.StatusMessage)
		}
	}
}

// TestValueLogReclaimed: records too big for the LSM tree (over 1 MiB)
// go to the value log, each rewrite a full copy; reclaiming it after
// every 32 MiB keeps the value log within twice the live records (GC
// rewrites a file once half of it is garbage) plus what was written since
// the last reclaim and the file being written.
func TestValueLogReclaimed(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	recs := []*model.Task{largeRecord(t, s, 1100<<10), largeRecord(t, s, 1100<<10)}
	const bound = 32<<20 + 2*16<<20 + 8<<20 // since the last reclaim, two value-log files, a memtable
	for round := range 50 {
		for _, rec := range recs {
			progress(t, s, rec.ID, round)
		}
		if live, disk := liveBytes(t, s), diskUsage(t, dir); disk > 2*live+bound {
			t.Fatalf("after %d rewrites of each record the store takes %d KiB on disk for %d KiB of records", round+1, disk>>10, live>>10)
		}
	}
	must(t, s.Close())
	s = openStore(t, dir)
	for _, rec := range recs {
		got, err := s.Get(rec.ID)
		must(t, err)
		if got.StatusMessage != "progress 49" || string(got.Arguments) != string(rec.Arguments) {
			t.Fatalf("record %s changed: %q", rec.ID, got.StatusMessage)
		}
	}
}

// largeRecord creates an open record whose arguments take about size
// bytes of JSON that does not compress.
func largeRecord(t testing.TB, s *badger.Store, size int) *model.Task {
	t.Helper()
	b := make([]byte, size*3/4)
	_, _ = rand.Read(b)
	args, err := json.Marshal(map[string]string{"blob": base64.StdEncoding.EncodeToString(b)})
	must(t, err)
	rec := model.NewIntent(model.ServerRef{Name: "s"}, "tool", args, "", t0)
	rec.TaskID = "srv-" + rec.ID
	must(t, rec.MoveTo(model.StatusWorking, "", t0))
	must(t, s.Create(rec))
	return rec
}

// progress writes what a poll that brought new progress writes.
func progress(t testing.TB, s *badger.Store, id string, n int) {
	t.Helper()
	_, err := s.Update(id, func(r *model.Task) (bool, error) {
		return r.Apply(model.Snapshot{TaskID: r.TaskID, Status: model.StatusWorking, StatusMessage: fmt.Sprint("progress ", n)}, time.Now())
	})
	if err != nil {
		t.Error(err)
	}
}

// liveBytes is the JSON size of every record in s.
func liveBytes(t testing.TB, s *badger.Store) int64 {
	t.Helper()
	all, err := s.All()
	must(t, err)
	var n int64
	for _, rec := range all {
		b, err := json.Marshal(rec)
		must(t, err)
		n += int64(len(b))
	}
	return n
}

// diskUsage is what du counts for dir: the blocks its files take, not
// their sizes (Badger's files are sparse).
func diskUsage(t testing.TB, dir string) int64 {
	t.Helper()
	var n int64
	for _, b := range diskByKind(t, dir) {
		n += b
	}
	return n
}

// diskByKind is diskUsage by the files' extension (sst, mem, vlog, and ""
// for the MANIFEST and the rest).
func diskByKind(t testing.TB, dir string) map[string]int64 {
	t.Helper()
	entries, err := os.ReadDir(dir)
	must(t, err)
	n := map[string]int64{}
	for _, e := range entries {
		fi, err := os.Lstat(filepath.Join(dir, e.Name()))
		if os.IsNotExist(err) {
			continue // Badger removed it meanwhile
		}
		must(t, err)
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && fi.Mode().IsRegular() {
			n[strings.TrimPrefix(filepath.Ext(e.Name()), ".")] += st.Blocks * 512
		}
	}
	return n
}

// TestAuditPruneGivesSpaceBackAtOnce: the records pruned, then their audit
// entries; the space of both comes back without a reopen. Before, the
// audit prune only marked the store for compaction at its next open: 604
// KiB of the 3.3 MiB stayed (the bench's "space after prune" target,
// missed at 21.5 MiB for 1,000 records, was the audit log of 199,000
// changes, which a prune of records keeps).
func TestAuditPruneGivesSpaceBackAtOnce(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	createFinished(t, s, 64*200)
	must(t, s.Close())
	s = openStore(t, dir)
	full := diskUsage(t, dir)
	if n, err := s.Prune(time.Time{}, tester); err != nil || n != 12800 {
		t.Fatalf("pruned %d: %v", n, err)
	}
	if n, err := s.PruneAudit(time.Now().Add(time.Hour)); err != nil || n != 2*12800 {
		t.Fatalf("pruned %d audit entries: %v", n, err)
	}
	after := diskUsage(t, dir)
	t.Logf("12800 records: %d KiB on disk; after pruning them and the audit log, still open: %d KiB", full>>10, after>>10)
	if after > full/8 {
		t.Fatalf("the open store takes %d KiB after pruning every record and the audit log, %d KiB before", after>>10, full>>10)
	}
}
