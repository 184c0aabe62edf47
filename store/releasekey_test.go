package store_test

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store"
)

// ReleaseKey takes a record's key in one synced commit: the record stays
// readable throughout, without the key after, and the key may name a new
// record.
func TestReleaseKeyIsOneCommit(t *testing.T) {
	s := newStore(t)
	rec := create(t, s, "k", model.StatusFailed, t0)
	before := store.Writes(s)

	// A reader meanwhile never finds the record gone.
	var vanished atomic.Bool
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := s.Get(rec.ID); errors.Is(err, store.ErrNotFound) {
				vanished.Store(true)
			}
		}
	})
	got, err := s.ReleaseKey(rec.ID, func(r *model.Task) bool { return r.Status == model.StatusFailed })
	close(stop)
	wg.Wait()
	must(t, err)
	if vanished.Load() {
		t.Error("a reader found the record gone while its key was released")
	}
	if n := store.Writes(s) - before; n != 1 {
		t.Errorf("releasing a key took %d commits, want 1", n)
	}
	stored, err := s.Get(rec.ID)
	must(t, err)
	if got.IdempotencyKey != "" || stored.IdempotencyKey != "" || stored.Status != model.StatusFailed {
		t.Fatalf("after release: returned key %q, stored key %q status %s; want the failed record without its key", got.IdempotencyKey, stored.IdempotencyKey, stored.Status)
	}
	if _, err := s.ByKey("k"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("ByKey after release: %v; want not found", err)
	}
	if _, err := store.Raw(s, "k\x00k"); err == nil {
		t.Fatal("the key's index entry is still there")
	}
	must(t, s.Create(intent("k", t0)))
}

// A record release refuses, or one without a key, is not written.
func TestReleaseKeyRefusedWritesNothing(t *testing.T) {
	s := newStore(t)
	rec := create(t, s, "k", model.StatusWorking, t0)
	before := store.Writes(s)
	got, err := s.ReleaseKey(rec.ID, func(r *model.Task) bool { return r.Status == model.StatusFailed })
	must(t, err)
	if got.IdempotencyKey != "k" || store.Writes(s) != before {
		t.Fatalf("a refused release: key %q, %d commits; want the key kept and nothing written", got.IdempotencyKey, store.Writes(s)-before)
	}
	if byKey, err := s.ByKey("k"); err != nil || byKey.ID != rec.ID {
		t.Fatalf("ByKey after a refused release: %v, %v", byKey, err)
	}
	if _, err := s.ReleaseKey("no-such-id", func(*model.Task) bool { return true }); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("release of a missing record: %v; want not found", err)
	}
}
