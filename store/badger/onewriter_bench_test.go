package badger

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/internal/cputime"
	"github.com/taskdeck/taskdeck/model"
)

// BenchmarkOneWriterCost bisects the one-writer durable create (the bench's
// section 1.1) in one run: round by round, in turns, 32 creates into the
// store as it is, into one with 4 KiB table blocks (the size before issue
// 20's second round), and without the audit entry (createUnaudited), and
// 32 bare appends of the same record bytes, each fsynced. x-fsync is the
// median over the rounds of each kind's time over the bare appends' (the
// bench's ratio); over-fsync-ns what a record costs beyond its fsync, and
// cpu-ns the process's CPU time (user and system, Badger's own goroutines
// included) per record, which a loaded machine's fsyncs do not move as
// much (run it with TMPDIR on a tmpfs too, where fsync costs nothing).
func BenchmarkOneWriterCost(b *testing.B) {
	dir := b.TempDir()
	open := func(name string) *Store {
		defer UseSizing(name)()
		s, err := Open(filepath.Join(dir, name), nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.Close() })
		return s
	}
	asIs, blocks4K, unaudited := open("small"), open("blocks4K"), open("unaudited")
	f, err := os.OpenFile(filepath.Join(dir, "bare"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	const perRound = 32
	rounds := max(1, b.N/perRound)
	n := rounds * perRound
	recs := make([][]*model.Task, 3)
	for k := range recs {
		recs[k] = make([]*model.Task, n)
		for i := range n {
			recs[k][i] = benchRecord(i, true)
		}
	}
	bare, err := json.Marshal(recs[0][0])
	if err != nil {
		b.Fatal(err)
	}
	names := []string{"as-is", "blocks4K", "unaudited"}
	kinds := []func(i int) error{
		func(i int) error { return asIs.Create(recs[0][i]) },
		func(i int) error { return blocks4K.Create(recs[1][i]) },
		func(i int) error { return createUnaudited(unaudited, recs[2][i]) },
		func(int) error {
			if _, err := f.Write(bare); err != nil {
				return err
			}
			return f.Sync()
		},
	}
	x := make([][]float64, len(names))
	over := make([][]float64, len(names))
	cpu := make([][]float64, len(names))
	b.ResetTimer()
	for r := range rounds {
		var d, c [4]time.Duration
		for j := range kinds {
			k := (j + r) % len(kinds) // each goes first in a quarter of the rounds
			start, cpu0 := time.Now(), cputime.Used(b)
			for i := r * perRound; i < (r+1)*perRound; i++ {
				if err := kinds[k](i); err != nil {
					b.Fatal(err)
				}
			}
			d[k], c[k] = time.Since(start), cputime.Used(b)-cpu0
		}
		for k := range names {
			x[k] = append(x[k], float64(d[k])/float64(d[3]))
			over[k] = append(over[k], float64(d[k]-d[3])/perRound)
			cpu[k] = append(cpu[k], float64(c[k])/perRound)
		}
	}
	b.StopTimer()
	for k, name := range names {
		slices.Sort(x[k])
		slices.Sort(over[k])
		slices.Sort(cpu[k])
		m := len(x[k])
		b.ReportMetric(x[k][m/2], "x-fsync-"+name)
		b.ReportMetric(x[k][m/4], "x-fsync-"+name+"-q1")
		b.ReportMetric(x[k][3*m/4], "x-fsync-"+name+"-q3")
		b.ReportMetric(over[k][m/2], "over-fsync-ns-"+name)
		b.ReportMetric(cpu[k][m/2], "cpu-ns-"+name)
	}
}
