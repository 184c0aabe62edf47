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
//     (each level's table for the key is searched: tables carry no bloom
//     filters, see BenchmarkGetWithoutBloom).
//
//   - "own-lsm", "any-lsm": "own" and "any" read from Badger as Get does
//     when its recent records (recent.go) do not hold the id: what the
//     LSM tree costs. "any" through Get reads the small store from those
//     records, all of it fitting.
//
//     go test -run '^$' -bench GetAtScale -benchtime 1x ./store/badger
func BenchmarkGetAtScale(b *testing.B) {
	small, smallIDs := filledStore(b, 1000)
	large, largeIDs := filledStore(b, 1000000)
	rng := rand.New(rand.NewPCG(1, 2))
	small1, large1 := missingIDs(b, rng, small, len(smallIDs)), missingIDs(b, rng, large, len(largeIDs))
	own := largeIDs[len(largeIDs)-len(smallIDs):]
	timeGets(b, rng, [2]*Store{small, large}, [2]string{"1k", "1M"}, []*getKind{
		{name: "own", ids: [2][]string{smallIDs, own}, found: true},
		{name: "any", ids: [2][]string{smallIDs, largeIDs}, found: true},
		{name: "miss", ids: [2][]string{small1, large1}},
		{name: "own-lsm", ids: [2][]string{smallIDs, own}, found: true, lsm: true},
		{name: "any-lsm", ids: [2][]string{smallIDs, largeIDs}, found: true, lsm: true},
	})
}

// BenchmarkGetWithoutBloom: what dropping the tables' bloom filters
// (options.go, bloomFalsePositive) costs a point lookup. Two stores of
// 1,000,000 records filled and reopened as in BenchmarkGetAtScale, one
// whose tables carry filters at Badger's default false-positive rate
// (0.01, what taskdeck used before) and one without; the same kinds of
// lookup alternate between them, the ratio is without/with. "-lsm" and
// "miss" reach Badger, where the filters act.
//
//	go test -run '^$' -bench GetWithoutBloom -benchtime 1x ./store/badger
func BenchmarkGetWithoutBloom(b *testing.B) {
	var stores [2]*Store
	var ids [2][]string
	for i, fp := range []float64{0.01, 0} {
		was := bloomFalsePositive
		bloomFalsePositive = fp
		stores[i], ids[i] = filledStore(b, 1000000)
		bloomFalsePositive = was
	}
	rng := rand.New(rand.NewPCG(1, 2))
	miss := [2][]string{missingIDs(b, rng, stores[0], len(ids[0])), missingIDs(b, rng, stores[1], len(ids[1]))}
	own := [2][]string{ids[0][len(ids[0])-1000:], ids[1][len(ids[1])-1000:]}
	timeGets(b, rng, stores, [2]string{"bloom", "none"}, []*getKind{
		{name: "own", ids: own, found: true},
		{name: "any", ids: ids, found: true},
		{name: "miss", ids: miss},
		{name: "own-lsm", ids: own, found: true, lsm: true},
		{name: "any-lsm", ids: ids, found: true, lsm: true},
	})
}

// getT0 is when filledStore's first record was made; its records are
// 1 µs apart.
var getT0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// filledStore is a store of n finished records (fill), closed and opened
// again as a restart leaves it, and their ids.
func filledStore(b *testing.B, n int) (*Store, []string) {
	dir := filepath.Join(b.TempDir(), "store")
	s, err := Open(dir, nil)
	if err != nil {
		b.Fatal(err)
	}
	ids := fill(b, s, n, getT0)
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	if s, err = Open(dir, nil); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s, ids
}

// missingIDs are 1,000 ids made at a time inside filledStore's n records'
// span, each checked absent from s.
func missingIDs(b *testing.B, rng *rand.Rand, s *Store, n int) []string {
	out := make([]string, 0, 1000)
	for len(out) < cap(out) {
		id := model.NewID(getT0.Add(time.Duration(rng.IntN(n)) * time.Microsecond))
		if _, err := s.Get(id); err != nil {
			out = append(out, id)
		}
	}
	return out
}

// getKind is one kind of lookup, with the ids it picks from in each of
// the two stores timeGets compares.
type getKind struct {
	name  string
	ids   [2][]string
	found bool
	lsm   bool      // read past Get's recent records
	x     []float64 // per counted round
}

// timeGets alternates lookups between the two stores, in rounds of each
// kind in turn (one to warm up, then 7 counted), so that the machine's
// load falls on both alike. Each round gives each kind's median in each
// store and their ratio (the second store's over the first's), reported
// as the median of the per-round medians (suffixed with the stores'
// names), and the ratio's median and range.
func timeGets(b *testing.B, rng *rand.Rand, stores [2]*Store, names [2]string, kinds []*getKind) {
	const rounds, perRound = 8, 3000
	get := func(s *Store, k *getKind, ids []string, into *samples) {
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
	med := map[string][2]samples{} // each kind's per-round medians in each store
	for r := range rounds {
		per := make([][2]samples, len(kinds))
		for i, k := range kinds {
			for range perRound {
				for j := range 2 {
					get(stores[j], k, k.ids[j], &per[i][j])
				}
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
		b.ReportMetric(float64(mm[0].median().Nanoseconds()), k.name+"-"+names[0]+"-ns")
		b.ReportMetric(float64(mm[1].median().Nanoseconds()), k.name+"-"+names[1]+"-ns")
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
