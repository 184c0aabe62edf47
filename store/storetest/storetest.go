// Package storetest is the contract suite every store.Backend passes, and
// the helpers its tests share with the backends' own tests.
package storetest

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store"
)

// Tester is the actor of the suite's deletions and prunes.
var Tester = model.Actor{Name: "tester", Role: model.RoleUser}

// Run runs the contract suite; open returns a new, empty backend for one
// subtest (closing it is open's business, e.g. with t.Cleanup).
func Run(t *testing.T, open func(t *testing.T) store.Backend) {
	for _, c := range []struct {
		name string
		fn   func(*testing.T, store.Backend)
	}{
		{"RoundTrip", testRoundTrip},
		{"IndexesFollowStatus", testIndexesFollowStatus},
		{"AllIsSortedByCreation", testAllIsSortedByCreation},
		{"MatchIDs", testMatchIDs},
		{"CreateRefusesBadRecords", testCreateRefusesBadRecords},
		{"DuplicateKey", testDuplicateKey},
		{"ConcurrentCreateOneKeyOneWinner", testConcurrentCreateOneKeyOneWinner},
		{"UpdateUnchangedWritesNothing", testUpdateUnchangedWritesNothing},
		{"UpdateErrorWritesNothing", testUpdateErrorWritesNothing},
		{"UpdateMayNotChangeIdentity", testUpdateMayNotChangeIdentity},
		{"ConcurrentUpdatesAreNotLost", testConcurrentUpdatesAreNotLost},
		{"ReleaseKey", testReleaseKey},
		{"NewestReadsTheLatestRecords", testNewestReadsTheLatestRecords},
		{"WindowAndPages", testWindowAndPages},
		{"Prune", testPrune},
		{"RevisionsIncreaseOnEveryWrite", testRevisionsIncreaseOnEveryWrite},
		{"SnapshotPlusHookIsHistory", testSnapshotPlusHookIsHistory},
		{"ChangesSinceEachRecordOnceAtLatest", testChangesSinceEachRecordOnceAtLatest},
		{"HookHearsOnlyCommittedChanges", testHookHearsOnlyCommittedChanges},
		{"ConcurrentWritersOneRecordPerKey", testConcurrentWritersOneRecordPerKey},
		{"ClosedRefusesCalls", testClosedRefusesCalls},
		{"AuditNamesEveryChange", testAuditNamesEveryChange},
		{"AuditPruneKeepsAVerifiableChain", testAuditPruneKeepsAVerifiableChain},
		{"AuditTail", testAuditTail},
	} {
		t.Run(c.name, func(t *testing.T) { c.fn(t, open(t)) })
	}
}

// T0 is the tests' clock.
var T0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// Intent is a new record of a call of the demo's sleep tool.
func Intent(key string, now time.Time) *model.Task {
	return model.NewIntent(model.ServerRef{Name: "demo"}, "sleep", json.RawMessage(`{"seconds":5}`), key, now)
}

// Create stores a record that has reached st through legal moves.
func Create(t testing.TB, s store.Backend, key string, st model.Status, now time.Time) *model.Task {
	t.Helper()
	rec := Intent(key, now)
	if st != model.StatusCalling {
		if st != model.StatusOrphaned {
			Must(t, rec.MoveTo(model.StatusWorking, "", now))
		}
		Must(t, rec.MoveTo(st, "", now))
	}
	Must(t, s.Create(rec))
	return rec
}

// Must fails the test on an error.
func Must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// IDs are the records' ids, in their order.
func IDs(ts []*model.Task) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.ID)
	}
	return out
}

// SortedIDs are the records' ids, sorted.
func SortedIDs(ts ...*model.Task) []string {
	out := IDs(ts)
	slices.Sort(out)
	return out
}

// MoveTo is an Update fn that moves a record to st (no change if it is
// there).
func MoveTo(st model.Status, at time.Time) func(*model.Task) (bool, error) {
	return func(t *model.Task) (bool, error) {
		if t.Status == st {
			return false, nil
		}
		return true, t.MoveTo(st, "", at)
	}
}

// WaitFor waits up to 10s for cond.
func WaitFor(t testing.TB, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(time.Millisecond)
	}
}

// RevsOf describes changes as rev:id:live, for comparing.
func RevsOf(cs []store.Change) []string {
	var out []string
	for _, c := range cs {
		out = append(out, fmt.Sprintf("%d:%s:%v", c.Rev, c.ID, c.Task != nil))
	}
	return out
}

// CountLive counts the records and the tombstones among changes.
func CountLive(cs []store.Change) (live, dead int) {
	for _, c := range cs {
		if c.Task != nil {
			live++
		} else {
			dead++
		}
	}
	return live, dead
}

// HookLog records what a commit hook hears, and whether two calls ever
// overlapped.
type HookLog struct {
	mu       sync.Mutex
	changes  []store.Change
	ids      map[string]bool
	inFlight atomic.Int32
	overlap  atomic.Bool
}

// Hook is the commit hook.
func (h *HookLog) Hook(cs []store.Change) {
	if h.inFlight.Add(1) > 1 {
		h.overlap.Store(true)
	}
	defer h.inFlight.Add(-1)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ids == nil {
		h.ids = map[string]bool{}
	}
	for _, c := range cs {
		h.changes = append(h.changes, c)
		h.ids[c.ID] = true
	}
}

// All is every change heard, in order.
func (h *HookLog) All() []store.Change {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.changes)
}

// Heard says whether a change of record id was heard.
func (h *HookLog) Heard(id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ids[id]
}

// Overlapped says whether two hook calls ever ran at once.
func (h *HookLog) Overlapped() bool { return h.overlap.Load() }

// CheckContiguous fails unless the changes carry revisions from..to, each
// once, in order, and never came in overlapping calls.
func (h *HookLog) CheckContiguous(t testing.TB, from, to uint64) {
	t.Helper()
	if h.Overlapped() {
		t.Error("two hook calls ran at once")
	}
	cs := h.All()
	if uint64(len(cs)) != to-from+1 {
		t.Fatalf("hook heard %d changes, want revisions %d..%d", len(cs), from, to)
	}
	for i, c := range cs {
		if c.Rev != from+uint64(i) {
			t.Fatalf("hook change %d has revision %d, want %d (in order, no hole, none twice)", i, c.Rev, from+uint64(i))
		}
		if c.Task != nil && c.Task.Revision != c.Rev {
			t.Fatalf("hook change at %d carries a record of revision %d", c.Rev, c.Task.Revision)
		}
	}
}
