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
	for range 2 { // kept on its second read
		_, gen = r.get(old.ID)
		r.put(old, 100, gen)
	}
	if got, _ := r.get(old.ID); got == nil || got == old {
		t.Fatalf("a read no commit overtook: kept %v, want a copy", got)
	}
	big := old.Clone()
	big.ID = model.NewID(time.Now())
	r.put(big, recentMaxBytes+1, gen)
	r.put(big, recentMaxBytes+1, gen)
	if got, _ := r.get(big.ID); got != nil {
		t.Fatal("a record over recentMaxBytes was kept")
	}
}

// The bounds: recentMax records and recentBytes of JSON, the oldest kept
// going first.
func TestRecentBounded(t *testing.T) {
	var r recent
	keep := func(n, size int) []string {
		var ids []string
		for range n {
			rec := model.NewIntent(model.ServerRef{Name: "demo"}, "sleep", nil, "", time.Now())
			for range 2 {
				_, gen := r.get(rec.ID)
				r.put(rec, size, gen)
			}
			ids = append(ids, rec.ID)
		}
		return ids
	}
	small := keep(recentMax+10, 100)
	if len(r.tasks) != recentMax || r.bytes != recentMax*100 {
		t.Fatalf("%d records of %d bytes kept, want %d of %d", len(r.tasks), r.bytes, recentMax, recentMax*100)
	}
	if got, _ := r.get(small[0]); got != nil {
		t.Fatal("the oldest record is still kept")
	}
	big := keep(recentBytes/recentMaxBytes+5, recentMaxBytes)
	if r.bytes > recentBytes {
		t.Fatalf("%d bytes kept, over recentBytes", r.bytes)
	}
	if got, _ := r.get(small[len(small)-1]); got != nil {
		t.Fatal("a small record outlived the big ones that filled recentBytes after it")
	}
	if got, _ := r.get(big[len(big)-1]); got == nil {
		t.Fatal("the newest record is not kept")
	}
}

// A record read once is not kept, so that reads of records nobody reads
// again do not push out the ones read over and over.
func TestRecentKeepsWhatIsReadAgain(t *testing.T) {
	var r recent
	read := func(rec *model.Task) {
		if got, gen := r.get(rec.ID); got == nil {
			r.put(rec, 100, gen)
		}
	}
	polled := model.NewIntent(model.ServerRef{Name: "demo"}, "sleep", nil, "", time.Now())
	read(polled)
	read(polled)
	for range 10 * recentMax {
		read(model.NewIntent(model.ServerRef{Name: "demo"}, "sleep", nil, "", time.Now()))
	}
	if got, _ := r.get(polled.ID); got == nil {
		t.Fatal("records read once pushed out the one read again")
	}
	if len(r.tasks) != 1 || len(r.once) > recentMax {
		t.Fatalf("%d records kept and %d read once noted, want 1 and at most %d", len(r.tasks), len(r.once), recentMax)
	}
}
