//go:build unix

package badger_test

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/internal/cputime"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store"
	"github.com/taskdeck/taskdeck/store/badger"
)

// The resource bounds of issue 20, as ratios against the live data.
//
//	go test -run '^$' -bench 'PolledLargeTasks' -benchtime 2400x ./store/badger   # 10 min at 250 ms
//	go test -run '^$' -bench 'FlippingTask/sizing=small$' -benchtime 10000x ./store/badger
//
// Time is simulated: each round writes what one poll of every task that
// brought new progress writes, back to back, so 2400 rounds are the
// writes of ten minutes of polls at 250 ms.

// BenchmarkPolledLargeTasks: ten open tasks with 100 KB of arguments, each
// round a new status message for each. The data directory is sampled
// every 40 rounds (10 s of polls); at the end half of the tasks finish and
// are pruned, then the audit log. The live data is the records and the
// audit entries kept (one of about 250 bytes a change, until the log is
// pruned: 24,000 over ten minutes). Metrics: the largest sample against
// the live data (disk/live-max), the same against the records alone
// (disk/records-max), and what is left after both prunes against the
// records left (disk/live-pruned).
func BenchmarkPolledLargeTasks(b *testing.B) { bySizing(b, polledLargeTasks) }

// bySizing runs f with the store's Badger sizing, with the one before
// issue 20 and with the candidates, one after the other in this process
// (-bench 'X/sizing=(small|blocks64K)$' picks some).
func bySizing(b *testing.B, f func(*testing.B)) {
	for _, sizing := range append(badger.Sizings, badger.Candidates...) {
		b.Run("sizing="+sizing, func(b *testing.B) {
			defer badger.UseSizing(sizing)()
			f(b)
		})
	}
}

func polledLargeTasks(b *testing.B) {
	dir := b.TempDir()
	s, err := badger.Open(dir, nil)
	must(b, err)
	defer s.Close()
	recs := make([]*model.Task, 10)
	for i := range recs {
		recs[i] = largeRecord(b, s, 100<<10)
	}
	var maxDisk, maxLive, maxRecs int64
	var worst, worstRecs float64
	var worstKinds string
	sample := func() {
		recs := liveBytes(b, s)
		kinds := diskByKind(b, dir)
		var disk int64
		for _, n := range kinds {
			disk += n
		}
		live := recs + auditBytes(b, s)
		if r := float64(disk) / float64(live); r > worst {
			worst, maxDisk, maxLive, maxRecs = r, disk, live, recs
			worstKinds = fmt.Sprintf("tables %.2f MiB, memtable WALs %.2f MiB, value log %.2f MiB, other %.2f MiB",
				mib(kinds["sst"]), mib(kinds["mem"]), mib(kinds["vlog"]), mib(disk-kinds["sst"]-kinds["mem"]-kinds["vlog"]))
		}
		worstRecs = max(worstRecs, float64(disk)/float64(recs))
	}
	b.ResetTimer()
	for round := range b.N {
		var wg sync.WaitGroup
		for _, rec := range recs {
			wg.Go(func() { progress(b, s, rec.ID, round) })
		}
		wg.Wait()
		if round%40 == 39 {
			sample()
		}
	}
	b.StopTimer()
	sample()
	for _, rec := range recs[:5] {
		_, err := s.Update(rec.ID, moveTo(model.StatusCompleted, time.Now()))
		must(b, err)
	}
	n, err := s.Prune(time.Time{}, tester)
	must(b, err)
	_, err = s.PruneAudit(time.Now())
	must(b, err)
	live, disk := liveBytes(b, s), diskUsage(b, dir)
	b.Logf("%d rounds (%s of polls at 250 ms): largest sample %.1f MiB (%s) for %.2f MiB of live data (%.2f MiB of records; %.1fx, %.1fx the records at most); after pruning %d and the audit log: %.2f MiB for %.2f MiB (%.2fx)",
		b.N, time.Duration(b.N)*250*time.Millisecond, mib(maxDisk), worstKinds, mib(maxLive), mib(maxRecs), worst, worstRecs, n, mib(disk), mib(live), float64(disk)/float64(live))
	b.ReportMetric(worst, "disk/live-max")
	b.ReportMetric(worstRecs, "disk/records-max")
	b.ReportMetric(float64(disk)/float64(live), "disk/live-pruned")
}

// auditBytes is the size of the audit entries s keeps.
func auditBytes(t testing.TB, s *badger.Store) int64 {
	t.Helper()
	var n int64
	_, err := s.AuditLog(0, func(_ model.AuditCheckpoint, _ uint64, body, hash []byte) error {
		n += int64(len(body) + len(hash))
		return nil
	})
	must(t, err)
	return n
}

// BenchmarkFlippingTask: one task that its server flips working ↔
// input_required with a 4 KB message, b.N times, each flip written. The
// metrics: the record's JSON bytes, its history entries, and the growth of
// the live heap and of the process's RSS, in MB, from the end of the first
// tenth of the flips to the last (the first tenth fill Badger's fixed
// working set: block and index caches, memtables, mapped files; reported
// as heap-warmup-MB and rss-warmup-MB). It runs as an owner: with the GC
// target and the soft memory limit store.TuneOwnerGC keeps, as taskdeck
// serve does (a GOGC or GOMEMLIMIT in the environment wins), since RSS
// follows them.
func BenchmarkFlippingTask(b *testing.B) { bySizing(b, flippingTask) }

func flippingTask(b *testing.B) {
	defer store.TuneOwnerGC()()
	s, err := badger.Open(b.TempDir(), nil)
	must(b, err)
	defer s.Close()
	rec := largeRecord(b, s, 1<<10)
	msg := strings.Repeat("m", 4<<10)
	heap0, rss0, file0 := heapAndRSS()
	heapW, rssW := heap0, rss0
	b.ResetTimer()
	for i := range b.N {
		if i == b.N/10 {
			b.StopTimer()
			heapW, rssW, _ = heapAndRSS()
			b.StartTimer()
		}
		flip(b, s, rec.ID, i, msg)
	}
	b.StopTimer()
	heap1, rss1, file1 := heapAndRSS()
	got, err := s.Get(rec.ID)
	must(b, err)
	size, err := json.Marshal(got)
	must(b, err)
	b.Logf("%d flips: record %d bytes, %d history entries; heap %+.1f MB in the first tenth, then %+.1f MB; RSS %+.1f MB, then %+.1f MB (%+.1f MB over all)",
		b.N, len(size), len(got.History), mb(heapW-heap0), mb(heap1-heapW), mb(rssW-rss0), mb(rss1-rssW), mb(rss1-rss0))
	b.ReportMetric(float64(len(size)), "record-bytes")
	b.ReportMetric(float64(len(got.History)), "history-entries")
	b.ReportMetric(mb(heapW-heap0), "heap-warmup-MB")
	b.ReportMetric(mb(heap1-heapW), "heap-growth-MB")
	b.ReportMetric(mb(rssW-rss0), "rss-warmup-MB")
	b.ReportMetric(mb(rss1-rssW), "rss-growth-MB")
	b.ReportMetric(mb(rss1-rss0), "rss-all-MB")
	b.ReportMetric(mb(file1-file0), "rss-file-all-MB")
}

// flip is the i-th flip of the task id: to input_required on even i, back
// to working on odd, with msg.
func flip(b *testing.B, s *badger.Store, id string, i int, msg string) {
	st := model.StatusInputRequired
	if i%2 == 1 {
		st = model.StatusWorking
	}
	_, err := s.Update(id, func(r *model.Task) (bool, error) {
		return r.Apply(model.Snapshot{TaskID: r.TaskID, Status: st, StatusMessage: fmt.Sprint(i, msg)}, time.Now())
	})
	must(b, err)
}

// BenchmarkOwnerLimitCost is what the owner's soft memory limit
// (store.TuneOwnerGC, which follows the live heap) costs the flipping
// task's writes: rounds of 100 flips at the owner's GC target alone and
// with the limit as well, alternating on one store in this process.
// x-cpu and x-time are the rounds with the limit over the others, in the
// process's CPU time (user+sys, Badger's goroutines included) and in wall
// time.
func BenchmarkOwnerLimitCost(b *testing.B) {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		b.Skip("GOGC or GOMEMLIMIT is set: the owner's tuning would not apply")
	}
	s, err := badger.Open(b.TempDir(), nil)
	must(b, err)
	defer s.Close()
	rec := largeRecord(b, s, 1<<10)
	msg := strings.Repeat("m", 4<<10)
	defer debug.SetGCPercent(debug.SetGCPercent(store.OwnerGCPercent))
	const perRound = 100
	var cpu, wall [2]time.Duration
	i := 0
	b.ResetTimer()
	for range max(1, b.N/perRound) {
		for limit := range 2 {
			restore := func() {}
			if limit == 1 {
				restore = store.TuneOwnerGC()
			}
			cpu0, start := cputime.Used(b), time.Now()
			for range perRound {
				flip(b, s, rec.ID, i, msg)
				i++
			}
			wall[limit] += time.Since(start)
			cpu[limit] += cputime.Used(b) - cpu0
			restore()
		}
	}
	b.ReportMetric(float64(cpu[1])/float64(cpu[0]), "x-cpu")
	b.ReportMetric(float64(wall[1])/float64(wall[0]), "x-time")
}

// heapAndRSS is the live heap after a collection, the resident set
// (VmRSS; 0 where /proc is absent) and its part that maps files (RssFile:
// Badger's tables, WAL and value log).
func heapAndRSS() (heap, rss, file int64) {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	b, _ := os.ReadFile("/proc/self/status")
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) != 3 {
			continue
		}
		kb, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			rss = kb << 10
		case "RssFile:":
			file = kb << 10
		}
	}
	return int64(m.HeapAlloc), rss, file
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

func mb(n int64) float64 { return float64(n) / 1e6 }
