package badger

import (
	"io/fs"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	boptions "github.com/dgraph-io/badger/v4/options"

	"github.com/taskdeck/taskdeck/internal/waitfor"
)

// BenchmarkReadCompression: what reading every open record costs (each
// poll reads its task's record) in a reopened store of 3,000 records, one
// in three open, written with the store's compression (Snappy) and with
// none, the two read in turn in this one process. It reports each one's
// time per read (the second read of each record: a task's later polls),
// the Go heap the reads left behind per record (after a GC, while the
// store is open) and the size on disk, and the ratios of Snappy over none.
//
//	go test -run '^$' -bench ReadCompression -benchtime 3x ./store
func BenchmarkReadCompression(b *testing.B) {
	kinds := []struct {
		name string
		c    boptions.CompressionType
	}{{"snappy", boptions.Snappy}, {"none", boptions.None}}
	defer func() { compression = boptions.Snappy }()
	dirs := make([]string, len(kinds))
	ids := make([][]string, len(kinds))
	for k, kind := range kinds {
		compression = kind.c
		dirs[k] = filepath.Join(b.TempDir(), kind.name)
		s, err := Open(dirs[k], nil)
		if err != nil {
			b.Fatal(err)
		}
		for i := range 3000 {
			rec := benchRecord(i, i%3 == 0)
			if err := s.Create(rec); err != nil {
				b.Fatal(err)
			}
			if i%3 == 0 {
				ids[k] = append(ids[k], rec.ID)
			}
		}
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
	}
	read := make([]time.Duration, len(kinds))
	heap := make([]float64, len(kinds))
	b.ResetTimer()
	for range b.N {
		for k, kind := range kinds {
			compression = kind.c
			s, err := Open(dirs[k], nil)
			if err != nil {
				b.Fatal(err)
			}
			// Open compacts the level-0 table the last Close flushed; its
			// builders' buffers are not the reads' to count.
			waitfor.Within(b, 30*time.Second, "level 0 compacted", func() bool {
				for _, t := range s.db.Tables() {
					if t.Level == 0 {
						return false
					}
				}
				return true
			})
			h0 := heapInUse()
			// The first read of each record, then the one timed: a task's
			// every later poll.
			var start time.Time
			for pass := range 2 {
				start = time.Now()
				for _, id := range ids[k] {
					if _, err := s.Get(id); err != nil {
						b.Fatal(err, pass)
					}
				}
			}
			read[k] += time.Since(start)
			heap[k] += float64(heapInUse()) - float64(h0)
			if err := s.Close(); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	reads := float64(b.N * len(ids[0]))
	for k, kind := range kinds {
		b.ReportMetric(float64(read[k].Nanoseconds())/reads, kind.name+"-ns/read")
		b.ReportMetric(heap[k]/reads, kind.name+"-heapB/record")
		b.ReportMetric(float64(onDisk(b, dirs[k])), kind.name+"-bytes-on-disk")
	}
	b.ReportMetric(float64(read[0])/float64(read[1]), "x-read")
	b.ReportMetric(heap[0]/max(heap[1], 1), "x-heap")
}

// heapInUse is the Go heap in use after a GC.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// onDisk is what the files under dir take on disk (allocated blocks).
func onDisk(b *testing.B, dir string) int64 {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			n += st.Blocks * 512
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return n
}
