package storefill

import (
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/internal/cputime"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store/badger"
)

// createConcurrently is how Fill wrote before badger.Load, the baseline of
// BenchmarkFill: 64 goroutines calling Create on an open store, which
// joins their commits into synced groups.
func createConcurrently(dir string, recs []*model.Task) error {
	s, err := badger.Open(dir, nil)
	if err != nil {
		return err
	}
	var next atomic.Int64
	errs := make([]error, 64)
	var wg sync.WaitGroup
	for w := range errs {
		wg.Go(func() {
			for k := int(next.Add(1) - 1); k < len(recs) && errs[w] == nil; k = int(next.Add(1) - 1) {
				errs[w] = s.Create(recs[k])
			}
		})
	}
	wg.Wait()
	errs = append(errs, s.Close())
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// BenchmarkFill times badger.Load against 64 concurrent Creates on the
// same 20,000 records (1% open), in rounds (b.N) that alternate which
// goes first; it reports each one's records/s and CPU per record
// (medians), and the ratios.
//
//	go test -run '^$' -bench Fill -benchtime 3x ./internal/storefill
func BenchmarkFill(b *testing.B) {
	const open, finished = 200, 19_800
	var wall, cpu [2][]float64
	for round := range b.N {
		for k := range 2 {
			i := (k + round) % 2
			var recs []*model.Task
			for r := range Records(open, finished) {
				recs = append(recs, r)
			}
			dir := b.TempDir()
			start, c0 := time.Now(), cputime.Used(b)
			var err error
			if i == 0 {
				err = createConcurrently(dir, recs)
			} else {
				_, err = badger.Load(dir, slices.Values(recs))
			}
			if err != nil {
				b.Fatal(err)
			}
			wall[i] = append(wall[i], time.Since(start).Seconds())
			cpu[i] = append(cpu[i], (cputime.Used(b) - c0).Seconds())
		}
	}
	n := float64(open + finished)
	b.ReportMetric(n/median(wall[0]), "create-records/s")
	b.ReportMetric(n/median(wall[1]), "load-records/s")
	b.ReportMetric(median(cpu[0])/n*1e6, "create-cpu-µs/record")
	b.ReportMetric(median(cpu[1])/n*1e6, "load-cpu-µs/record")
	b.ReportMetric(median(wall[0])/median(wall[1]), "wall-create/load")
	b.ReportMetric(median(cpu[0])/median(cpu[1]), "cpu-create/load")
}
