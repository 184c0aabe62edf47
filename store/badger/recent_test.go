package badger_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store"
)

// Get keeps the records it read (recent.go): every change a commit makes
// must reach the next Get, and what a caller does to the record it got
// must not reach the next caller.
func TestGetReadsEveryCommitAfterIt(t *testing.T) {
	s := newStore(t)
	a, b := create(t, s, "a", model.StatusWorking, t0), create(t, s, "b", model.StatusCompleted, t0)
	read := func(id string) { // twice: Get keeps a record on its second read
		for range 2 {
			_, err := s.Get(id)
			must(t, err)
		}
	}
	read(a.ID)
	read(b.ID)
	for i := range 3 {
		msg := fmt.Sprintf("step %d", i)
		done, err := s.Update(a.ID, func(t *model.Task) (bool, error) { t.StatusMessage = msg; return true, nil })
		must(t, err)
		got, err := s.Get(a.ID)
		must(t, err)
		if got.StatusMessage != msg || got.Revision != done.Revision {
			t.Fatalf("Get after update %d: %q at revision %d, want %q at %d", i, got.StatusMessage, got.Revision, msg, done.Revision)
		}
		read(a.ID)
		hit, err := s.Get(a.ID)
		must(t, err)
		hit.StatusMessage = "changed by the caller"
		if again, _ := s.Get(a.ID); again.StatusMessage != msg {
			t.Fatalf("a caller's change to its copy reached the next Get: %q", again.StatusMessage)
		}
	}
	_, err := s.Update(a.ID, moveTo(model.StatusCompleted, t0.Add(time.Minute)))
	must(t, err)
	if got, _ := s.Get(a.ID); got.Status != model.StatusCompleted {
		t.Fatalf("Get after the record was finished: %s", got.Status)
	}
	must(t, s.Delete(a.ID, tester))
	if _, err := s.Get(a.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get after Delete: %v, want ErrNotFound", err)
	}
	n, err := s.Prune(t0.Add(time.Hour), tester)
	must(t, err)
	if _, err := s.Get(b.ID); n != 1 || !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get after a prune of %d: %v, want ErrNotFound", n, err)
	}
	must(t, s.Close())
	if _, err := s.Get(b.ID); err == nil || errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get on a closed store: %v, want the store's closed error", err)
	}
}
