package postgres_test

import (
	"slices"
	"sync"
	"testing"

	"github.com/taskdeck/taskdeck/internal/pgtest"
	"github.com/taskdeck/taskdeck/store"
)

// TestHealthHookHearsRequests: the health hook hears each request's
// outcome, not only the listener's: answered (nil) while the database
// runs, and the request's own connection error once it is gone, as the
// engine pauses its polls on it.
func TestHealthHookHearsRequests(t *testing.T) {
	s := open(t, pgtest.DB(t))
	var mu sync.Mutex
	var heard []error
	s.SetHealthHook(func(err error) {
		mu.Lock()
		defer mu.Unlock()
		heard = append(heard, err)
	})
	heardOf := func(want error) bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.ContainsFunc(heard, func(e error) bool { return e == want })
	}
	if _, err := s.Counts(); err != nil {
		t.Fatal(err)
	}
	if !heardOf(nil) {
		t.Fatal("an answered request told the hook nothing")
	}
	pgtest.Stop(t)
	t.Cleanup(func() { pgtest.Start(t) })
	_, err := s.Get("06h3denps0mkkyp1")
	if !store.Unreachable(err) {
		t.Fatalf("Get with the database stopped: %v, want a connection error", err)
	}
	if !heardOf(err) {
		t.Fatalf("the hook did not hear the request's error %v", err)
	}
}
