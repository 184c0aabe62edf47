package postgres_test

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/internal/pgtest"
	"github.com/taskdeck/taskdeck/model"
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
	if !errors.Is(err, postgres.ErrClaimLost) {
		t.Fatalf("a's write after losing its claim: %v, want ErrClaimLost", err)
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
