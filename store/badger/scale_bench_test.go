package badger

import (
	"encoding/json"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
	"time"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/taskdeck/taskdeck/model"
)

// BenchmarkGetAtScale: the exact lookup the proxy makes for an agent's
// task id (the record's id: one key, no scan), on a store of 1,000
// records and on one of 1,000,000, in the same run. The records are
// written in batches behind the store's API (a million durable commits
// would take an hour), each a finished task as the store keeps one; both
// stores are then closed and opened again, as a restart leaves them.
// Lookups alternate between the two stores, in rounds of each kind in
// turn (one to warm up, then 7 counted), so that the machine's load falls
// on both alike; each round gives the
// median of each kind and the ratio 1,000,000/1,000, reported as the
// median ratio and its range over the rounds:
//
//   - "own": an agent polling its own tasks, the newest 1,000 records of
//     the big store against the 1,000 of the small one. Target: flat
//     (x-own <= 1.2).
//
//   - "any": any record, uniformly. In the big store (a few hundred MB of
//     tables) each lands on memory no cache holds: about ten probes of a
//     table's block index, a bloom filter and a block, each a miss of the
//     CPU's caches; the small store is all in them. Reported, not flat.
//
//   - "miss": a well-formed id inside the stored range that is not there
//     (the bloom filters answer).
//
//   - "own-lsm", "any-lsm": "own" and "any" read from Badger as Get does
//     when its recent records (recent.go) do not hold the id: what the
//     LSM tree costs. "any" through Get reads the small store from those
//     records, all of it fitting.
//
//     go test -run '^$' -bench GetAtScale -benchtime 1x ./store/badger
func BenchmarkGetAtScale(b *testing.B) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	open := func(n int) (*Store, []string) {
		dir := filepath.Join(b.TempDir(), "store")
		s, err := Open(dir, nil)
		if err != nil {
			b.Fatal(err)
		}
		ids := fill(b, s, n, t0)
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
		if s, err = Open(dir, nil); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		return s, ids
	}
	small, smallIDs := open(1000)
	large, largeIDs := open(1000000)
	rng := rand.New(rand.NewPCG(1, 2))
	// missing: ids made at a time inside the n records' span (1 µs apart),
	// each checked absent.
	missing := func(s *Store, n int) []string {
		out := make([]string, 0, 1000)
		for len(out) < cap(out) {
			id := model.NewID(t0.Add(time.Duration(rng.IntN(n)) * time.Microsecond))
			if _, err := s.Get(id); err != nil {
				out = append(out, id)
			}
		}
		return out
	}
	small1, large1 := missing(small, len(smallIDs)), missing(large, len(largeIDs))
	const rounds, perRound = 8, 3000
	type kind struct {
		name               string
		smallIDs, largeIDs []string
		found              bool
		lsm                bool      // read past Get's recent records
		x                  []float64 // per counted round
	}
	own := largeIDs[len(largeIDs)-len(smallIDs):]
	kinds := []*kind{
		{name: "own", smallIDs: smallIDs, largeIDs: own, found: true},
		{name: "any", smallIDs: smallIDs, largeIDs: largeIDs, found: true},
		{name: "miss", smallIDs: small1, largeIDs: large1},
		{name: "own-lsm", smallIDs: smallIDs, largeIDs: own, found: true, lsm: true},
		{name: "any-lsm", smallIDs: smallIDs, largeIDs: largeIDs, found: true, lsm: true},
	}
	get := func(s *Store, k *kind, ids []string, into *samples) {
		id := ids[rng.IntN(len(ids))]
		start := time.Now()
		var err error
		if k.lsm {
			err = s.view(func(txn *badger.Txn) error { _, _, err := getRecord(txn, id); return err })
		} else {
			_, err = s.Get(id)
		}
		*into = append(*into, time.Since(start))
		if (err == nil) != k.found {
			b.Fatalf("Get(%s): %v", id, err)
		}
	}
	med := map[string][2]samples{} // each kind's per-round medians, small and large
	for r := range rounds {
		per := make([][2]samples, len(kinds))
		for i, k := range kinds {
			for range perRound {
				get(small, k, k.smallIDs, &per[i][0])
				get(large, k, k.largeIDs, &per[i][1])
			}
		}
		if r == 0 {
			continue // warm-up
		}
		for i, k := range kinds {
			m1, m2 := per[i][0].median(), per[i][1].median()
			k.x = append(k.x, float64(m2)/float64(m1))
			mm := med[k.name]
			mm[0], mm[1] = append(mm[0], m1), append(mm[1], m2)
			med[k.name] = mm
		}
	}
	for b.Loop() {
	}
	for _, k := range kinds {
		mm := med[k.name]
		b.ReportMetric(float64(mm[0].median().Nanoseconds()), k.name+"-1k-ns")
		b.ReportMetric(float64(mm[1].median().Nanoseconds()), k.name+"-1M-ns")
		slices.Sort(k.x)
		b.ReportMetric(k.x[len(k.x)/2], "x-"+k.name)
		b.ReportMetric(k.x[0], "x-"+k.name+"-lo")
		b.ReportMetric(k.x[len(k.x)-1], "x-"+k.name+"-hi")
	}
}

type samples []time.Duration

func (s samples) median() time.Duration {
	c := slices.Clone(s)
	slices.Sort(c)
	return c[len(c)/2]
}

// fill writes n finished records (as an agent's, with owner and handle
// hash), made 1 µs apart from t0, in write batches, and returns their ids.
func fill(b *testing.B, s *Store, n int, t0 time.Time) []string {
	b.Helper()
	wb := s.db.NewWriteBatch()
	defer wb.Cancel()
	ids := make([]string, n)
	for i := range n {
		now := t0.Add(time.Duration(i) * time.Microsecond)
		rec := model.NewIntent(model.ServerRef{Name: "demo"}, "sleep", json.RawMessage(`{"seconds":1}`), "", now)
		rec.Owner, rec.HandleHash = "agent", "3f79bb7b435b05321651daefd374cdc681dc06faa65e374e38337b88ca046dea"
		_ = rec.MoveTo(model.StatusWorking, "", now)
		_ = rec.MoveTo(model.StatusCompleted, "", now)
		v, err := json.Marshal(rec)
		if err != nil {
			b.Fatal(err)
		}
		if err := wb.Set(recordKey(rec.ID), v); err != nil {
			b.Fatal(err)
		}
		ids[i] = rec.ID
	}
	if err := wb.Flush(); err != nil {
		b.Fatal(err)
	}
	return ids
}
