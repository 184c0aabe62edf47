package store

import (
	"encoding/json"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/model"
)

// BenchmarkGetAtScale: the exact lookup the proxy makes for an agent's
// task id (the record's id: one key, no scan), on a store of 1,000
// records and on one of 1,000,000, in the same run: hits (a record the
// store holds) and misses (a well-formed id it does not). Target: the
// 1,000,000-record medians within a small factor of the 1,000-record ones
// ("x-hit", "x-miss"), where a scan would be 1,000x. The records are
// written in batches behind the store's API (a million durable commits
// would take an hour); each is a finished task as the store keeps one.
//
//	go test -run '^$' -bench GetAtScale -benchtime 20000x ./store
func BenchmarkGetAtScale(b *testing.B) {
	// Both stores are filled, closed and opened again (as a restart
	// leaves them: the memtable flushed), then read round by round, so
	// that the machine's load falls on both alike.
	open := func(n int) (*Store, []string) {
		dir := filepath.Join(b.TempDir(), "store")
		s, err := Open(dir, nil)
		if err != nil {
			b.Fatal(err)
		}
		ids := fill(b, s, n)
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
	const k = 20000
	missing := make([]string, k)
	for i := range missing {
		missing[i] = model.NewID(time.Now().Add(time.Duration(i+1) * time.Hour)) // later than any stored
	}
	rng := rand.New(rand.NewPCG(1, 2))
	get := func(s *Store, id string, want bool, into *samples) {
		start := time.Now()
		_, err := s.Get(id)
		*into = append(*into, time.Since(start))
		if (err == nil) != want {
			b.Fatalf("Get(%s): %v", id, err)
		}
	}
	var hit1k, hit1M, miss1k, miss1M samples
	for range 2 { // the first round warms the caches, the second counts
		hit1k, hit1M, miss1k, miss1M = nil, nil, nil, nil
		for i := range k {
			get(small, smallIDs[rng.IntN(len(smallIDs))], true, &hit1k)
			get(large, largeIDs[rng.IntN(len(largeIDs))], true, &hit1M)
			get(small, missing[i], false, &miss1k)
			get(large, missing[i], false, &miss1M)
		}
	}
	for b.Loop() {
	}
	report := func(name string, s samples) time.Duration {
		m := s.median()
		b.ReportMetric(float64(m.Nanoseconds()), name+"-ns")
		return m
	}
	h1, h2 := report("hit-1k", hit1k), report("hit-1M", hit1M)
	m1, m2 := report("miss-1k", miss1k), report("miss-1M", miss1M)
	b.ReportMetric(float64(h2)/float64(h1), "x-hit")
	b.ReportMetric(float64(m2)/float64(m1), "x-miss")
}

type samples []time.Duration

func (s samples) median() time.Duration {
	c := slices.Clone(s)
	slices.Sort(c)
	return c[len(c)/2]
}

// fill writes n finished records (as an agent's, with owner and handle
// hash) in write batches, and returns their ids.
func fill(b *testing.B, s *Store, n int) []string {
	b.Helper()
	wb := s.db.NewWriteBatch()
	defer wb.Cancel()
	ids := make([]string, n)
	t0 := time.Now().Add(-time.Hour)
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
