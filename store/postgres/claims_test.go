package postgres_test

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/internal/pgtest"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store"
	"github.com/taskdeck/taskdeck/store/postgres"
	"github.com/taskdeck/taskdeck/store/storetest"
)

// Three engines claiming in batches at once never claim one task twice,
// between them claim every open task, and none of another server's.
func TestClaimsAreDisjoint(t *testing.T) {
	conn := pgtest.DB(t)
	engines := []*postgres.Store{open(t, conn), open(t, conn), open(t, conn)}
	var open []string
	for i := range 60 {
		rec := storetest.Create(t, engines[0], "", model.StatusWorking, storetest.T0)
		open = append(open, rec.ID)
		if i%10 == 0 {
			storetest.Create(t, engines[0], "", model.StatusCompleted, storetest.T0)
		}
	}
	other := storetest.Intent("", storetest.T0)
	other.Server.Name = "elsewhere"
	storetest.Must(t, engines[0].Create(other))

	claimed := make([][]postgres.Claim, len(engines))
	var wg sync.WaitGroup
	for i, e := range engines {
		wg.Go(func() {
			for {
				cs, err := e.ClaimTasks([]string{"engine-a", "engine-b", "engine-c"}[i], []string{"demo"}, 7, time.Minute)
				if err != nil {
					t.Error(err)
					return
				}
				if len(cs) == 0 {
					return
				}
				claimed[i] = append(claimed[i], cs...)
			}
		})
	}
	wg.Wait()
	var all []string
	for _, cs := range claimed {
		for _, c := range cs {
			all = append(all, c.ID)
		}
	}
	slices.Sort(all)
	slices.Sort(open)
	if !slices.Equal(all, open) {
		t.Fatalf("the engines claimed %d tasks (%d distinct), want each of the %d open ones once", len(all), len(slices.Compact(slices.Clone(all))), len(open))
	}
}

// A claim whose lease ran out is taken by another engine with a higher
// fence; the first engine's write of a poll result is then refused, its
// renewal drops the claim, and the new holder's write goes through.
func TestLostClaimCannotWrite(t *testing.T) {
	conn := pgtest.DB(t)
	a, b := open(t, conn), open(t, conn)
	rec := storetest.Create(t, a, "", model.StatusWorking, storetest.T0)
	ca, err := a.ClaimTasks("engine-a", []string{"demo"}, 10, 300*time.Millisecond)
	storetest.Must(t, err)
	if len(ca) != 1 {
		t.Fatalf("engine a claimed %v, want the one task", ca)
	}
	// While a's lease holds, b gets nothing, and a may write.
	if cb, err := b.ClaimTasks("engine-b", []string{"demo"}, 10, time.Minute); err != nil || len(cb) != 0 {
		t.Fatalf("engine b claimed %v, %v while a's lease holds", cb, err)
	}
	_, err = a.UpdateClaimed(ca[0], func(t *model.Task) (bool, error) { t.StatusMessage = "a polled"; return true, nil })
	storetest.Must(t, err)
	// A lease renewed is kept.
	kept, err := a.RenewClaims(ca, 300*time.Millisecond)
	storetest.Must(t, err)
	if len(kept) != 1 {
		t.Fatalf("renewal kept %v", kept)
	}
	var cb []postgres.Claim
	storetest.WaitFor(t, func() bool {
		cb, err = b.ClaimTasks("engine-b", []string{"demo"}, 10, time.Minute)
		storetest.Must(t, err)
		return len(cb) == 1
	})
	if cb[0].Fence <= ca[0].Fence {
		t.Fatalf("b's fence %d is not above a's %d", cb[0].Fence, ca[0].Fence)
	}
	rev := a.Revision()
	_, err = a.UpdateClaimed(ca[0], func(t *model.Task) (bool, error) { t.StatusMessage = "a, too late"; return true, nil })
	if !errors.Is(err, store.ErrFenced) {
		t.Fatalf("a's write after losing its claim: %v, want ErrFenced", err)
	}
	if kept, err := a.RenewClaims(ca, time.Minute); err != nil || len(kept) != 0 {
		t.Fatalf("a renewed a lost claim: %v, %v", kept, err)
	}
	got, err := b.UpdateClaimed(cb[0], func(t *model.Task) (bool, error) { t.StatusMessage = "b polled"; return true, nil })
	storetest.Must(t, err)
	stored, err := a.Get(rec.ID)
	storetest.Must(t, err)
	if stored.StatusMessage != "b polled" || got.Revision != rev+1 {
		t.Fatalf("stored %q at %d; want b's write, the one after %d", stored.StatusMessage, got.Revision, rev)
	}
}

// A write with no claim (fence 0) goes through while no engine holds the
// task, and is refused while one does: an engine that never had, or has
// lost, the claim cannot overwrite the one that holds it.
func TestUnclaimedWriteOnlyWhileNoneHolds(t *testing.T) {
	conn := pgtest.DB(t)
	a, b := open(t, conn), open(t, conn)
	rec := storetest.Create(t, a, "", model.StatusWorking, storetest.T0)
	none := postgres.Claim{ID: rec.ID, Owner: "engine-a"}
	_, err := a.UpdateClaimed(none, func(t *model.Task) (bool, error) { t.StatusMessage = "unclaimed"; return true, nil })
	storetest.Must(t, err)
	cb, err := b.ClaimTasks("engine-b", []string{"demo"}, 10, time.Minute)
	storetest.Must(t, err)
	if len(cb) != 1 {
		t.Fatalf("engine b claimed %v, want the one task", cb)
	}
	_, err = a.UpdateClaimed(none, func(t *model.Task) (bool, error) { t.StatusMessage = "a overwrites"; return true, nil })
	if !errors.Is(err, store.ErrFenced) {
		t.Fatalf("a's unclaimed write while b holds the claim: %v, want ErrFenced", err)
	}
	stored, err := a.Get(rec.ID)
	storetest.Must(t, err)
	if stored.StatusMessage != "unclaimed" {
		t.Fatalf("stored %q, want the write before b's claim", stored.StatusMessage)
	}
}

// The fleet view: who holds each open task's claim, which servers a live
// engine can poll (an engine that left, or whose time ran out, counts no
// more), and when another engine's claim runs out first.
func TestFleetView(t *testing.T) {
	conn := pgtest.DB(t)
	a, b := open(t, conn), open(t, conn)
	rec := storetest.Create(t, a, "", model.StatusWorking, storetest.T0)
	storetest.Must(t, a.Heartbeat("engine-a", []string{"demo", "http://127.0.0.1:9/mcp"}, time.Minute))
	storetest.Must(t, b.Heartbeat("engine-b", []string{"other"}, 200*time.Millisecond))
	before := time.Now()
	cb, err := b.ClaimTasks("engine-b", []string{"demo"}, 10, time.Minute)
	storetest.Must(t, err)
	if len(cb) != 1 {
		t.Fatalf("engine b claimed %v, want the one task", cb)
	}
	f, err := a.Fleet("engine-a", []string{"demo"})
	storetest.Must(t, err)
	if f.Watchers[rec.ID] != "engine-b" {
		t.Errorf("watchers %v, want %s watched by engine-b", f.Watchers, rec.ID)
	}
	if !f.Reachable["demo"] || !f.Reachable["http://127.0.0.1:9/mcp"] {
		t.Errorf("reachable %v, want engine-a's servers", f.Reachable)
	}
	if exp := f.NextExpiry.Sub(before); exp < 50*time.Second || exp > 70*time.Second {
		t.Errorf("the next expiry is %v from the claim, want b's lease of a minute", exp)
	}
	storetest.WaitFor(t, func() bool {
		f, err := a.Fleet("engine-a", []string{"demo"})
		storetest.Must(t, err)
		return !f.Reachable["other"]
	})
	storetest.Must(t, a.Leave("engine-a"))
	f, err = b.Fleet("engine-b", nil)
	storetest.Must(t, err)
	if len(f.Reachable) != 0 {
		t.Errorf("reachable %v after every engine left or ran out, want none", f.Reachable)
	}
}

// ClaimExpired takes only tasks whose claim ran out, never one no engine
// has claimed yet (those go by the share) nor one whose claim holds.
func TestClaimExpiredTakesOnlyRunOutClaims(t *testing.T) {
	conn := pgtest.DB(t)
	a, b := open(t, conn), open(t, conn)
	ran := storetest.Create(t, a, "", model.StatusWorking, storetest.T0)
	ca, err := a.ClaimTasks("engine-a", []string{"demo"}, 1, 200*time.Millisecond)
	storetest.Must(t, err)
	held := storetest.Create(t, a, "", model.StatusWorking, storetest.T0)
	_, err = a.ClaimTasks("engine-a", []string{"demo"}, 1, time.Minute)
	storetest.Must(t, err)
	fresh := storetest.Create(t, a, "", model.StatusWorking, storetest.T0)
	if len(ca) != 1 || ca[0].ID != ran.ID {
		t.Fatalf("engine a claimed %v, want %s", ca, ran.ID)
	}
	var got []postgres.Claim
	storetest.WaitFor(t, func() bool {
		got, err = b.ClaimExpired("engine-b", []string{"demo"}, 10, time.Minute)
		storetest.Must(t, err)
		return len(got) > 0
	})
	if len(got) != 1 || got[0].ID != ran.ID {
		t.Fatalf("engine b took %v, want only %s (not %s, held, nor %s, never claimed)", got, ran.ID, held.ID, fresh.ID)
	}
}
