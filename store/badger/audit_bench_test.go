package badger

import (
	"github.com/taskdeck/taskdeck/internal/cputime"
	"github.com/taskdeck/taskdeck/store"

	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
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

// auditBytes is what the actor and the audit entry add to the stored bytes
// of rec's durable create at w writers: the act and the history's "by" in
// the record, the entry and its length in its commit's run, and the run's
// key and chain hash shared by the w entries of a commit.
func auditBytes(s *Store, rec *model.Task, act *model.Act, w int) (int, error) {
	attributed := rec.Clone()
	attributed.Act = act
	attributed.Attribute(nil, engineActor)
	plain, err := json.Marshal(rec)
	if err != nil {
		return 0, err
	}
	full, err := json.Marshal(attributed)
	if err != nil {
		return 0, err
	}
	e := len(s.auditEntry(nil, attributed, full).stored)
	run := len(revKey(auditPrefix, 0)) + sha256.Size
	if w > 1 {
		e += len(binary.AppendUvarint(nil, uint64(e)))
		run += 8 // the key's first revision
	}
	return len(full) - len(plain) + e + run/w, nil
}

// padded is rec with n more bytes in its arguments (n > 9, the field's
// own JSON): random hex digits, which Snappy cannot shrink in the tables
// any more than it can the entry's hashes and seal (a run of one letter
// compressed to nothing, and the padded store cost less than the bytes
// it was to stand for).
func padded(rec *model.Task, n int) *model.Task {
	a := rec.Arguments
	pad := make([]byte, (n-len(`,"pad":""`)+1)/2)
	_, _ = rand.Read(pad) // never fails
	rec.Arguments = fmt.Appendf(slices.Clone(a[:len(a)-1]), `,"pad":"%s"}`, hex.EncodeToString(pad)[:n-len(`,"pad":""`)])
	return rec
}

// BenchmarkAuditedCreate times the durable write with its actor and audit
// entry (an act named, the record attributed, the entry sealed, hashed
// and chained into its commit's run, one more key in each commit's txn)
// against the same write without them, in the same run: each round times
// both, on stores of their own; a third store that writes each entry
// under a key of its own, as schema 3 did (entryKeys); and a fourth that
// writes without them records padded by the bytes they add (auditBytes).
// The order turns round by round. x-unaudited is the median of the
// rounds' ratios of the audited store against the store without audit
// (target ≤ 1.15), x-entrykeys and x-padded the same for the third and
// fourth stores; -q1 and -q3 their quartiles. cpu-x-unaudited is the
// same ratio of the process's CPU time
// (Badger's goroutines included), which a loaded machine's slow fsyncs
// move less than the wall time. total-x-unaudited is the ratio of the
// audited store's whole time to the unaudited one's: the throughput,
// flushes and compactions included, which land in a few rounds only.
//
// A round is max(16, writers) creates of each kind: 16 rounds at 64
// writers and -benchtime 1024x, 256 at 16384x. Rounds of 1,024 creates
// (16 a writer) put the stores' memtable flushes and compactions, each
// ~0.1 s on a 1 MiB memtable, into random rounds and kinds (an idle
// 64-writer run gave round ratios of 0.6–2.3); short rounds leave most of
// them free of any, and the median ignores the others. A short round's
// ratio scatters too (two or three group commits, their fsyncs): under a
// load of 16–20, 256 rounds gave the same median twice (1.24, 1.25) and
// 16 rounds did not.
func BenchmarkAuditedCreate(b *testing.B) {
	actor := model.Actor{Name: "alice", Role: model.RoleUser}
	act := func() *model.Act { return &model.Act{Kind: model.ActCall, Actor: actor} }
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
			plain, runs, keys, pad := open("plain"), open("runs"), open("keys"), open("padded")
			for _, s := range []*Store{runs, keys} {
				s.SetAuditKey([]byte("the benchmark's audit key, 32 b."))
			}
			keys.entryKeys = true
			extra, err := auditBytes(runs, benchRecord(0, true), act(), writers)
			if err != nil {
				b.Fatal(err)
			}
			records := func(f func(*model.Task) *model.Task) []*model.Task {
				out := make([]*model.Task, b.N)
				for i := range out {
					out[i] = f(benchRecord(i, true))
				}
				return out
			}
			acted := func(t *model.Task) *model.Task { t.Act = act(); return t }
			base := records(func(t *model.Task) *model.Task { return t })
			mine, keyed := records(acted), records(acted)
			pads := records(func(t *model.Task) *model.Task { return padded(t, extra) })
			size := max(16, writers)
			rounds := max(1, b.N/size)
			ratios := make([][]float64, 4) // runs, entry keys, padded, runs' CPU
			var total [2]time.Duration     // unaudited, runs
			b.ResetTimer()
			for r := range rounds {
				lo, hi := b.N*r/rounds, b.N*(r+1)/rounds
				kinds := []func(i int) error{
					func(i int) error { return createUnaudited(plain, base[i]) },
					func(i int) error { return runs.Create(mine[i]) },
					func(i int) error { return keys.Create(keyed[i]) },
					func(i int) error { return createUnaudited(pad, pads[i]) },
				}
				var d, c [4]time.Duration
				for k := range kinds {
					k = (k + r) % len(kinds) // each goes first in a quarter of the rounds
					var err error
					cpu0 := cputime.Used(b)
					d[k], err = parallel(writers, hi-lo, func(i int) error { return kinds[k](lo + i) })
					if err != nil {
						b.Fatal(err)
					}
					c[k] = cputime.Used(b) - cpu0
				}
				total[0] += d[0]
				total[1] += d[1]
				for k := 1; k < 4; k++ {
					ratios[k-1] = append(ratios[k-1], float64(d[k])/float64(d[0]))
				}
				ratios[3] = append(ratios[3], float64(c[1])/float64(max(c[0], 1)))
			}
			b.StopTimer()
			b.ReportMetric(float64(total[0].Nanoseconds())/float64(b.N), "unaudited-ns/op")
			b.ReportMetric(float64(total[1])/float64(total[0]), "total-x-unaudited")
			b.ReportMetric(float64(extra), "audit-bytes/op")
			for k, name := range []string{"x-unaudited", "x-entrykeys", "x-padded", "cpu-x-unaudited"} {
				m := ratios[k]
				slices.Sort(m)
				n := len(m)
				b.ReportMetric(m[n/2], name)
				b.ReportMetric(m[n/4], name+"-q1")
				b.ReportMetric(m[3*n/4], name+"-q3")
			}
		})
	}
}
