package store_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store"
)

func TestPrune(t *testing.T) {
	s := newStore(t)
	old, cutoff, recent := t0, t0.Add(time.Hour), t0.Add(2*time.Hour)

	// More old terminal records than three chunks of 1000 minus one, so
	// that one txn for all of them would exceed Badger's batch limit
	// (9000 deletes; 5000 records failed in one txn in libraries.md).
	terminal := []model.Status{model.StatusCompleted, model.StatusFailed, model.StatusCancelled, model.StatusUnknown}
	const oldTerminal = 2600
	for i := range oldTerminal {
		key := ""
		if i%2 == 0 {
			key = fmt.Sprintf("old-%d", i)
		}
		create(t, s, key, terminal[i%len(terminal)], old)
	}
	var keep []*model.Task
	for _, st := range terminal[:3] {
		keep = append(keep, create(t, s, "recent-"+string(st), st, recent))
	}
	var open []*model.Task
	for _, st := range []model.Status{model.StatusCalling, model.StatusWorking, model.StatusInputRequired, model.StatusOrphaned} {
		open = append(open, create(t, s, "open-"+string(st), st, old)) // old, but never pruned
	}

	writes := store.Writes(s)
	n, err := s.Prune(cutoff)
	if err != nil {
		t.Fatalf("Prune: %v", err)
	}
	if n != oldTerminal {
		t.Fatalf("Prune deleted %d, want %d", n, oldTerminal)
	}
	if chunks := store.Writes(s) - writes; chunks != 3 {
		t.Errorf("Prune used %d write txns for %d records, want 3 chunks of at most 1000", chunks, oldTerminal)
	}

	all, err := s.All()
	must(t, err)
	if want := sortedIDs(append(slices.Clone(keep), open...)...); !slices.Equal(ids(all), want) {
		t.Fatalf("after Prune, All has %d records, want the %d recent and open ones", len(all), len(want))
	}
	counts, err := s.Counts()
	must(t, err)
	for _, st := range terminal[:3] {
		if counts[st] != 1 {
			t.Errorf("Counts[%s] = %d, want 1 (the recent one)", st, counts[st])
		}
	}
	if counts[model.StatusUnknown] != 0 {
		t.Errorf("Counts[unknown] = %d, want 0", counts[model.StatusUnknown])
	}
	// Pruned records took their idempotency keys with them.
	if _, err := s.ByKey("old-0"); err == nil {
		t.Error("a pruned record's idempotency key still resolves")
	}
	if _, err := s.ByKey("recent-completed"); err != nil {
		t.Errorf("a kept record's key: %v", err)
	}

	// Idempotent: nothing more is due at this cutoff.
	if n, err := s.Prune(cutoff); err != nil || n != 0 {
		t.Fatalf("second Prune = %d, %v; want 0, nil", n, err)
	}
	// A zero cutoff takes every terminal record, and still no open one.
	if n, err := s.Prune(time.Time{}); err != nil || n != len(keep) {
		t.Fatalf("Prune(zero) = %d, %v; want %d", n, err, len(keep))
	}
	rest, err := s.All()
	must(t, err)
	if !slices.Equal(ids(rest), sortedIDs(open...)) {
		t.Fatalf("after Prune(zero), All = %v, want the open records %v", ids(rest), sortedIDs(open...))
	}
	// Only the open records' keys remain: record, status and key index each.
	keys, err := store.Keys(s)
	must(t, err)
	if want := 1 + 3*len(open); len(keys) != want {
		t.Fatalf("%d keys left, want %d", len(keys), want)
	}
}
