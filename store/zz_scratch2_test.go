//go:build unix

package store_test

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store"
)

func TestZZFlipHeap(t *testing.T) {
	s, err := store.Open(t.TempDir(), nil)
	must(t, err)
	defer s.Close()
	rec := largeRecord(t, s, 1<<10)
	msg := strings.Repeat("m", 4<<10)
	heap0, rss0 := heapAndRSS()
	for i := range 2000 {
		st := model.StatusInputRequired
		if i%2 == 1 {
			st = model.StatusWorking
		}
		_, err := s.Update(rec.ID, func(r *model.Task) (bool, error) {
			return r.Apply(model.Snapshot{TaskID: r.TaskID, Status: st, StatusMessage: fmt.Sprint(i, msg)}, time.Now())
		})
		must(t, err)
		if i%500 == 499 {
			h, r := heapAndRSS()
			st, _ := os.ReadFile("/proc/self/status")
			var extra []string
			for _, l := range strings.Split(string(st), "\n") {
				if strings.HasPrefix(l, "RssAnon") || strings.HasPrefix(l, "RssFile") {
					extra = append(extra, strings.Join(strings.Fields(l), " "))
				}
			}
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			t.Logf("%d flips: heap %+.1f MB RSS %+.1f MB %v heapsys %.1f MB released %.1f", i+1, mb(h-heap0), mb(r-rss0), extra, mb(int64(ms.HeapSys)), mb(int64(ms.HeapReleased)))
		}
	}
	f, _ := os.Create("/tmp/b2heap.prof")
	pprof.Lookup("heap").WriteTo(f, 0)
	f.Close()
}
