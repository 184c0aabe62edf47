package badger

import (
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
	return s.commitRecord(rec.ID, val, func(txn *badger.Txn, rv *revisions) error {
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
// in the same run: x-unaudited is the median ratio of rounds that time
// both, on stores of their own, one after the other, each first in half
// the rounds (target ≤ 1.15).
func BenchmarkAuditedCreate(b *testing.B) {
	actor := model.Actor{Name: "alice", Role: model.RoleUser}
	for _, writers := range []int{1, 64} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			dir := b.TempDir()
			audited, err := Open(filepath.Join(dir, "audited"), nil)
			if err != nil {
				b.Fatal(err)
			}
			defer audited.Close()
			audited.SetAuditKey([]byte("the benchmark's audit key, 32 b."))
			plain, err := Open(filepath.Join(dir, "plain"), nil)
			if err != nil {
				b.Fatal(err)
			}
			defer plain.Close()
			mine, base := make([]*model.Task, b.N), make([]*model.Task, b.N)
			for i := range b.N {
				mine[i], base[i] = benchRecord(i, true), benchRecord(i, true)
				mine[i].Act = &model.Act{Kind: model.ActCall, Actor: actor}
			}
			// Many short rounds, each timing both; the median of the
			// rounds' ratios, since one slow fsync would sway a total.
			rounds := max(1, b.N/(4*writers))
			ratios := make([]float64, 0, rounds)
			var bare time.Duration
			b.ResetTimer()
			for r := range rounds {
				lo, hi := b.N*r/rounds, b.N*(r+1)/rounds
				timed := func(create func(i int) error) time.Duration {
					d, err := parallel(writers, hi-lo, func(i int) error { return create(lo + i) })
					if err != nil {
						b.Fatal(err)
					}
					return d
				}
				unaudited := func(i int) error { return createUnaudited(plain, base[i]) }
				withAudit := func(i int) error { return audited.Create(mine[i]) }
				var d0, d1 time.Duration
				if r%2 == 0 { // each goes first in half the rounds
					d0, d1 = timed(unaudited), timed(withAudit)
				} else {
					d1, d0 = timed(withAudit), timed(unaudited)
				}
				bare += d0
				ratios = append(ratios, float64(d1)/float64(d0))
			}
			b.StopTimer()
			slices.Sort(ratios)
			b.ReportMetric(float64(bare.Nanoseconds())/float64(b.N), "unaudited-ns/op")
			b.ReportMetric(ratios[len(ratios)/2], "x-unaudited")
		})
	}
}
