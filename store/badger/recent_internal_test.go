package badger

import (
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store"
)

// A read that began before a commit may hold what the commit replaced:
// it is not kept, whichever of the two finished first.
func TestRecentKeepsNoReadACommitOvertook(t *testing.T) {
	var r recent
	old := model.NewIntent(model.ServerRef{Name: "demo"}, "sleep", nil, "", time.Now())
	_, gen := r.get(old.ID)
	r.forget([]store.Change{{ID: old.ID}})
	r.put(old, 100, gen)
	if got, _ := r.get(old.ID); got != nil {
		t.Fatal("a read begun before a commit of its record was kept")
	}
	_, gen = r.get(old.ID)
	r.put(old, 100, gen)
	if got, _ := r.get(old.ID); got == nil || got == old {
		t.Fatalf("a read no commit overtook: kept %v, want a copy", got)
	}
	big := old.Clone()
	big.ID = model.NewID(time.Now())
	r.put(big, recentMaxBytes+1, gen)
	if got, _ := r.get(big.ID); got != nil {
		t.Fatal("a record over recentMaxBytes was kept")
	}
}

// The bound: recentMax records, the oldest kept going first.
func TestRecentBounded(t *testing.T) {
	var r recent
	var ids []string
	for i := range recentMax + 10 {
		rec := model.NewIntent(model.ServerRef{Name: "demo"}, "sleep", nil, "", time.Unix(int64(i), 0))
		_, gen := r.get(rec.ID)
		r.put(rec, 100, gen)
		ids = append(ids, rec.ID)
	}
	if len(r.tasks) != recentMax {
		t.Fatalf("%d records kept, want %d", len(r.tasks), recentMax)
	}
	if got, _ := r.get(ids[0]); got != nil {
		t.Fatal("the oldest record is still kept")
	}
	if got, _ := r.get(ids[len(ids)-1]); got == nil {
		t.Fatal("the newest record is not kept")
	}
}
