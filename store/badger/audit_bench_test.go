package badger

import (
	"github.com/taskdeck/taskdeck/internal/cputime"
	"github.com/taskdeck/taskdeck/store"

	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/taskdeck/taskdeck/model"
)

// createUnaudited is the durable write as it was before actors and the
// audit log: Create's reads and commit (key index, record, revision
// entry), with no act and no audit entry. BenchmarkAuditedCreate's
// baseline.
func createUnaudited(s *Store, rec *model.Task) error {
	stored := rec.Clone()
	stored.Revision = 0
	val, err := json.Marshal(stored)
	if err != nil {
		return err
	}
	return s.commitRecord(rec.ID, val, nil, func(txn *badger.Txn, rv *revisions) error {
		if _, err := txn.Get(recordKey(rec.ID)); !errors.Is(err, badger.ErrKeyNotFound) {
			return fmt.Errorf("task %s exists or cannot be read: %v", rec.ID, err)
		}
		if _, err := byKey(txn, rec.IdempotencyKey); !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("key %s: %v", rec.IdempotencyKey, err)
		}
		if err := txn.Set(idemKey(rec.IdempotencyKey), []byte(rec.ID)); err != nil {
			return err
		}
		rv.meta.rev++
		stored.Revision = rv.meta.rev
		if err := putRecord(txn, stored, withRevision(val, stored.Revision), ""); err != nil {
			return err
		}
		if err := txn.Set(revKey(revPrefix, stored.Revision), []byte(stored.ID)); err != nil {
			return err
		}
		rv.changes = append(rv.changes, store.Change{Rev: stored.Revision, ID: stored.ID, Task: stored})
		return nil
	})
}

// BenchmarkAuditedCreate times the durable write with its actor and audit
// entry (an act named, the record attributed, the entry sealed, hashed
// and chained, one more key in the txn) against the same write without them,
// in the same run: each round times both, on stores of their own, and a
// third store whose entries are stored canonical (JSON), as before they
// were packed; the order turns round by round. x-unaudited is the median
// of the rounds' ratios of the packed store against the store without
// audit (target ≤ 1.15), x-unaudited-json the same for the JSON store;
// -q1 and -q3 their quartiles. cpu-x-unaudited is the same ratio of the
// process's CPU time (Badger's goroutines included), which a loaded
// machine's slow fsyncs move less than the wall time.
func BenchmarkAuditedCreate(b *testing.B) {
	actor := model.Actor{Name: "alice", Role: model.RoleUser}
	for _, writers := range []int{1, 64} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			dir := b.TempDir()
			open := func(name string) *Store {
				s, err := Open(filepath.Join(dir, name), nil)
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { _ = s.Close() })
				return s
			}
			plain, packed, canonical := open("plain"), open("packed"), open("json")
			for _, s := range []*Store{packed, canonical} {
				s.SetAuditKey([]byte("the benchmark's audit key, 32 b."))
			}
			canonical.canonAudit = true
			records := func(act bool) []*model.Task {
				out := make([]*model.Task, b.N)
				for i := range out {
					out[i] = benchRecord(i, true)
					if act {
						out[i].Act = &model.Act{Kind: model.ActCall, Actor: actor}
					}
				}
				return out
			}
			base, mine, canon := records(false), records(true), records(true)
			// Rounds of 16 creates a writer, each timing all three; the
			// median of the rounds' ratios, since one slow fsync would
			// sway a total (at 4 a writer, a round was a few group
			// commits, and its ratios ranged 0.5–3.6 on a loaded machine).
			rounds := max(1, b.N/(16*writers))
			var toPacked, toJSON, cpuPacked []float64
			var bare time.Duration
			b.ResetTimer()
			for r := range rounds {
				lo, hi := b.N*r/rounds, b.N*(r+1)/rounds
				kinds := []func(i int) error{
					func(i int) error { return createUnaudited(plain, base[i]) },
					func(i int) error { return packed.Create(mine[i]) },
					func(i int) error { return canonical.Create(canon[i]) },
				}
				var d, c [3]time.Duration
				for k := range kinds {
					k = (k + r) % len(kinds) // each goes first in a third of the rounds
					var err error
					cpu0 := cputime.Used(b)
					d[k], err = parallel(writers, hi-lo, func(i int) error { return kinds[k](lo + i) })
					if err != nil {
						b.Fatal(err)
					}
					c[k] = cputime.Used(b) - cpu0
				}
				bare += d[0]
				toPacked = append(toPacked, float64(d[1])/float64(d[0]))
				toJSON = append(toJSON, float64(d[2])/float64(d[0]))
				cpuPacked = append(cpuPacked, float64(c[1])/float64(max(c[0], 1)))
			}
			b.StopTimer()
			b.ReportMetric(float64(bare.Nanoseconds())/float64(b.N), "unaudited-ns/op")
			for _, m := range []struct {
				name   string
				ratios []float64
			}{{"x-unaudited", toPacked}, {"x-unaudited-json", toJSON}, {"cpu-x-unaudited", cpuPacked}} {
				slices.Sort(m.ratios)
				n := len(m.ratios)
				b.ReportMetric(m.ratios[n/2], m.name)
				b.ReportMetric(m.ratios[n/4], m.name+"-q1")
				b.ReportMetric(m.ratios[3*n/4], m.name+"-q3")
			}
		})
	}
}
