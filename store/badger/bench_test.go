package badger

import (
	"github.com/taskdeck/taskdeck/store"

	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/internal/cputime"
	"github.com/taskdeck/taskdeck/model"
)

// Product-side benchmarks: each reports a ratio against a baseline measured
// in the same run. The comparisons with SQLite live in bench/ (its own
// module), so that this one needs no cgo.

func benchRecord(i int, open bool) *model.Task {
	now := time.Now()
	args := json.RawMessage(fmt.Sprintf(`{"seconds":%d,"note":"benchmark record %d"}`, i%600, i))
	rec := model.NewIntent(model.ServerRef{Name: "demo"}, "sleep", args, fmt.Sprintf("key-%d", i), now)
	rec.TaskID = fmt.Sprintf("TASK%028d", i)
	_ = rec.MoveTo(model.StatusWorking, "", now)
	if !open {
		_ = rec.MoveTo(model.StatusCompleted, "", now)
		rec.Result = json.RawMessage(`{"content":[{"type":"text","text":"done"}]}`)
	}
	return rec
}

// parallel runs n calls of f(i) with w goroutines and returns the time.
func parallel(w, n int, f func(i int) error) (time.Duration, error) {
	var next atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	start := time.Now()
	for range w {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := f(i); err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if v := firstErr.Load(); v != nil {
		return 0, v.(error)
	}
	return time.Since(start), nil
}

// BenchmarkCreate times the durable record write against the physical
// limit measured in the same run: appending the same bytes to a file and
// fsyncing it. x-fsync is time per record over the bare write's (target
// ≤ 1.3 with one writer); with 64 writers, concurrent commits share fsyncs
// and the ratio drops well below 1.
//
// Each runs with the store's sizing and with the one before issue 20
// (sizing=before20, 8 MiB memtables): x-fsync of the two compares them.
func BenchmarkCreate(b *testing.B) {
	for _, sizing := range Sizings {
		for _, writers := range []int{1, 64} {
			b.Run(fmt.Sprintf("sizing=%s/writers=%d", sizing, writers), func(b *testing.B) {
				defer UseSizing(sizing)()
				benchmarkCreate(b, writers)
			})
		}
	}
}

func benchmarkCreate(b *testing.B, writers int) {
	dir := b.TempDir()
	s, err := Open(filepath.Join(dir, "store"), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	f, err := os.OpenFile(filepath.Join(dir, "bare"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	recs := make([]*model.Task, b.N)
	vals := make([][]byte, b.N)
	for i := range recs {
		recs[i] = benchRecord(i, true)
		vals[i], _ = json.Marshal(recs[i])
	}
	b.ResetTimer()
	ours, err := parallel(writers, b.N, func(i int) error { return s.Create(recs[i]) })
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	var mu sync.Mutex // one file: a write and its fsync stay together
	bare, err := parallel(writers, b.N, func(i int) error {
		if writers > 1 {
			mu.Lock()
			defer mu.Unlock()
		}
		if _, err := f.Write(vals[i]); err != nil {
			return err
		}
		return f.Sync()
	})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(bare.Nanoseconds())/float64(b.N), "fsync-ns/op")
	b.ReportMetric(float64(ours)/float64(bare), "x-fsync")
}

// BenchmarkCreateOwnerGC is BenchmarkCreate with Go's GC target (gc=100)
// and with an owner's (OwnerGCPercent), one after the other in this
// process: the cost of the smaller heap is the ratio of their x-fsync.
func BenchmarkCreateOwnerGC(b *testing.B) {
	for _, gc := range []int{100, store.OwnerGCPercent} {
		for _, writers := range []int{1, 64} {
			b.Run(fmt.Sprintf("gc=%d/writers=%d", gc, writers), func(b *testing.B) {
				defer debug.SetGCPercent(debug.SetGCPercent(gc))
				benchmarkCreate(b, writers)
			})
		}
	}
}

// BenchmarkUpdateNoChange is the store side of a poll that changed nothing:
// it must commit nothing and write no byte. commits/op counts Badger commit
// timestamps; bytes/op is Badger's on-disk size growth. Both must be 0. The
// baseline is an Update that changes the record (x-changed compares times).
func BenchmarkUpdateNoChange(b *testing.B) {
	s, err := Open(b.TempDir(), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	rec := benchRecord(0, true)
	if err := s.Create(rec); err != nil {
		b.Fatal(err)
	}
	snap := model.Snapshot{Status: model.StatusWorking, TaskID: rec.TaskID}
	n := 0
	changed := func() time.Duration {
		start := time.Now()
		for range 50 {
			n++
			if _, err := s.Update(rec.ID, func(t *model.Task) (bool, error) {
				t.StatusMessage = fmt.Sprint("step ", n)
				return true, nil
			}); err != nil {
				b.Fatal(err)
			}
		}
		return time.Since(start) / 50
	}()
	apply := func(t *model.Task) (bool, error) { return t.Apply(snap, time.Now()) }
	if _, err := s.Update(rec.ID, apply); err != nil { // the first one changes the message
		b.Fatal(err)
	}
	lsm0, vlog0 := s.db.Size()
	v0 := s.db.MaxVersion()
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		if _, err := s.Update(rec.ID, apply); err != nil {
			b.Fatal(err)
		}
	}
	el := time.Since(start)
	b.StopTimer()
	if err := s.db.Sync(); err != nil {
		b.Fatal(err)
	}
	lsm1, vlog1 := s.db.Size()
	b.ReportMetric(float64(s.db.MaxVersion()-v0)/float64(b.N), "commits/op")
	b.ReportMetric(float64((lsm1-lsm0)+(vlog1-vlog0))/float64(b.N), "bytes/op")
	b.ReportMetric(float64(el)/float64(b.N)/float64(changed), "x-changed")
}

// BenchmarkOpenTasks lists the open tasks of a store where most records
// are terminal, against the full scan it avoids (x-scan, lower is better).
func BenchmarkOpenTasks(b *testing.B) {
	const total, open = 20000, 200
	s, err := Open(b.TempDir(), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if _, err := parallel(64, total, func(i int) error { return s.Create(benchRecord(i, i%(total/open) == 0)) }); err != nil {
		b.Fatal(err)
	}
	scan := func() time.Duration {
		start := time.Now()
		all, err := s.All()
		if err != nil || len(all) != total {
			b.Fatal(len(all), err)
		}
		return time.Since(start)
	}()
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		got, err := s.OpenTasks()
		if err != nil || len(got) != open {
			b.Fatal(len(got), err)
		}
	}
	b.ReportMetric(float64(time.Since(start))/float64(b.N)/float64(scan), "x-scan")
}

// BenchmarkSizingWriteCost: the durable write under the store's Badger
// sizing against the sizing before issue 20, interleaved so that a busy
// machine slows both alike: each round updates a 30 KB record in a store
// of each sizing (a poll that brought progress) and creates a small one
// in each. x-update and x-create are the store's time over the old one's;
// x-update-64K and x-create-64K: 64 KiB blocks' time over the store's.
func BenchmarkSizingWriteCost(b *testing.B) {
	open := func(name string) *Store {
		defer UseSizing(name)()
		s, err := Open(filepath.Join(b.TempDir(), name), nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.Close() })
		return s
	}
	stores := []*Store{open("small"), open("before20"), open("blocks64K")}
	big := benchRecord(0, true)
	big.Arguments = json.RawMessage(fmt.Sprintf(`{"note":%q}`, strings.Repeat("x", 30<<10)))
	for _, s := range stores {
		if err := s.Create(big.Clone()); err != nil {
			b.Fatal(err)
		}
	}
	var update, create [3]time.Duration
	b.ResetTimer()
	for i := range b.N {
		for j, s := range stores {
			start := time.Now()
			_, err := s.Update(big.ID, func(r *model.Task) (bool, error) {
				r.StatusMessage = fmt.Sprint("progress ", i)
				return true, nil
			})
			update[j] += time.Since(start)
			if err != nil {
				b.Fatal(err)
			}
			start = time.Now()
			err = s.Create(benchRecord(i+1, true))
			create[j] += time.Since(start)
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(update[0].Nanoseconds())/float64(b.N), "update-ns/op")
	b.ReportMetric(float64(update[0])/float64(update[1]), "x-update")
	b.ReportMetric(float64(create[0].Nanoseconds())/float64(b.N), "create-ns/op")
	b.ReportMetric(float64(create[0])/float64(create[1]), "x-create")
	b.ReportMetric(float64(update[2])/float64(update[0]), "x-update-64K")
	b.ReportMetric(float64(create[2])/float64(create[0]), "x-create-64K")
}

// BenchmarkSizingParallelCreate: 64 writers creating small records, the
// load of an owner under many clients, in one store of each sizing,
// interleaved batch by batch (the order turning each round) so that a
// busy machine slows all alike. It reports each sizing's time per record
// and, against before20, the median ratio of the rounds with its range.
// Candidates (export_test.go) are variations measured beside them.
func BenchmarkSizingParallelCreate(b *testing.B) {
	const writers, batch = 64, 1024
	names := append([]string{"small", "before20"}, Candidates...)
	stores := make([]*Store, len(names))
	for j, name := range names {
		restore := UseSizing(name)
		s, err := Open(filepath.Join(b.TempDir(), name), nil)
		restore()
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.Close() })
		stores[j] = s
	}
	total := make([]time.Duration, len(names))
	ratios := make([][]float64, len(names))
	b.ResetTimer()
	for round := range b.N {
		took := make([]time.Duration, len(names))
		for k := range names {
			j := (round + k) % len(names)
			d, err := parallel(writers, batch, func(i int) error {
				return stores[j].Create(benchRecord(round*batch+i, true))
			})
			if err != nil {
				b.Fatal(err)
			}
			took[j] = d
			total[j] += d
		}
		for j := range names {
			ratios[j] = append(ratios[j], float64(took[j])/float64(took[1]))
		}
	}
	b.StopTimer()
	for j, name := range names {
		b.ReportMetric(float64(total[j].Nanoseconds())/float64(b.N*batch), name+"-ns/rec")
		if j == 1 {
			continue
		}
		r := ratios[j]
		slices.Sort(r)
		b.ReportMetric(r[len(r)/2], "x-"+name)
		b.ReportMetric(r[0], "min-x-"+name)
		b.ReportMetric(r[len(r)-1], "max-x-"+name)
	}
}

// BenchmarkHandles: what an owner's start reads of 10,000 open records
// (their handles) against reading them whole (ByStatus, its read before),
// interleaved; x-bystatus is the handles' time over the whole records',
// and cpu-x-bystatus the same for the process's CPU (ByStatus decodes on
// every core).
func BenchmarkHandles(b *testing.B) {
	const open = 10000
	s, err := Open(b.TempDir(), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if _, err := parallel(64, open, func(i int) error { return s.Create(benchRecord(i, true)) }); err != nil {
		b.Fatal(err)
	}
	statuses := []model.Status{model.StatusWorking}
	var wall, cpu [2]time.Duration
	b.ResetTimer()
	for i := range b.N {
		for k := range 2 {
			k = (k + i) % 2
			start, cpu0 := time.Now(), cputime.Used(b)
			n := 0
			if k == 0 {
				hs, err := s.Handles(statuses...)
				n = len(hs)
				if err != nil {
					b.Fatal(err)
				}
			} else {
				recs, err := s.ByStatus(statuses...)
				n = len(recs)
				if err != nil {
					b.Fatal(err)
				}
			}
			if n != open {
				b.Fatalf("read %d records, want %d", n, open)
			}
			wall[k] += time.Since(start)
			cpu[k] += cputime.Used(b) - cpu0
		}
	}
	b.ReportMetric(float64(wall[0])/float64(wall[1]), "x-bystatus")
	b.ReportMetric(float64(cpu[0])/float64(cpu[1]), "cpu-x-bystatus")
}
