package badger

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// BenchmarkWALProbe times what every commit's sync pays to learn whether
// Badger started a new memtable WAL: the next WAL's name looked up from
// the store's open directory (exists), against opening it by its full
// path, as the syncer did before; in turns, 64 probes of each a round,
// for a file that is not there (every commit but one a memtable).
// x-full-path is the median of the rounds' ratios of the full path's
// time over exists'; -q1 and -q3 its quartiles.
func BenchmarkWALProbe(b *testing.B) {
	dir := filepath.Join(b.TempDir(), "store")
	if err := os.Mkdir(dir, 0o700); err != nil {
		b.Fatal(err)
	}
	d, err := os.Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	name := walName(12)
	path := filepath.Join(dir, name)
	kinds := []func(){
		func() {
			if exists(d, name) {
				b.Fatal("found")
			}
		},
		func() {
			if f, err := os.OpenFile(path, os.O_RDWR, 0); err == nil {
				f.Close()
				b.Fatal("found")
			}
		},
	}
	const perRound = 64
	var ratios []float64
	b.ResetTimer()
	for r := range max(1, b.N/perRound) {
		var t [2]time.Duration
		for j := range kinds {
			k := (j + r) % len(kinds)
			start := time.Now()
			for range perRound {
				kinds[k]()
			}
			t[k] = time.Since(start)
		}
		ratios = append(ratios, float64(t[1])/float64(t[0]))
	}
	b.StopTimer()
	slices.Sort(ratios)
	n := len(ratios)
	b.ReportMetric(ratios[n/2], "x-full-path")
	b.ReportMetric(ratios[n/4], "x-full-path-q1")
	b.ReportMetric(ratios[3*n/4], "x-full-path-q3")
}
