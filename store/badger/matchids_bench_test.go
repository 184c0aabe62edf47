package badger

import (
	"iter"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store/storetest"
)

// BenchmarkShortID times what resolving an operator's short id (a unique
// suffix) reads in a store of 20,000 records: MatchIDs, the ids alone,
// against All, which decoded every record for it before. Round by round,
// in turns; match-us is MatchIDs' median time, x-all the median of All's time over MatchIDs' (-q1, -q3
// its quartiles).
func BenchmarkShortID(b *testing.B) {
	const n = 20_000
	dir := filepath.Join(b.TempDir(), "s")
	ids := make([]string, 0, n)
	recs := func(yield func(*model.Task) bool) {
		for i := range n {
			rec := storetest.Intent("", storetest.T0.Add(time.Duration(i)*time.Millisecond))
			ids = append(ids, rec.ID)
			if !yield(rec) {
				return
			}
		}
	}
	if _, err := Load(dir, iter.Seq[*model.Task](recs)); err != nil {
		b.Fatal(err)
	}
	s, err := Open(dir, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	part := ids[n/2][model.IDLen-6:]
	kinds := []func() (int, error){
		func() (int, error) { got, err := s.MatchIDs(part, 2); return len(got), err },
		func() (int, error) {
			all, err := s.All()
			found := 0
			for _, t := range all {
				if strings.HasPrefix(t.ID, part) || strings.HasSuffix(t.ID, part) {
					found++
				}
			}
			return found, err
		},
	}
	var ratios, match []float64
	b.ResetTimer()
	for r := range b.N {
		var d [2]time.Duration
		for j := range kinds {
			k := (j + r) % len(kinds)
			start := time.Now()
			found, err := kinds[k]()
			d[k] = time.Since(start)
			if err != nil || found != 1 {
				b.Fatalf("%q: %d found, %v; want one", part, found, err)
			}
		}
		ratios = append(ratios, float64(d[1])/float64(d[0]))
		match = append(match, float64(d[0].Microseconds()))
	}
	b.StopTimer()
	slices.Sort(ratios)
	slices.Sort(match)
	m := len(ratios)
	b.ReportMetric(match[m/2], "match-us")
	b.ReportMetric(ratios[m/2], "x-all")
	b.ReportMetric(ratios[m/4], "x-all-q1")
	b.ReportMetric(ratios[3*m/4], "x-all-q3")
}
