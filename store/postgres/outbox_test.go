package postgres_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/internal/pgtest"
	"github.com/taskdeck/taskdeck/internal/waitfor"
	mcpconfig "github.com/taskdeck/taskdeck/mcpclient/config"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/notify"
	"github.com/taskdeck/taskdeck/store"
	"github.com/taskdeck/taskdeck/store/postgres"
)

// failedEvents tells endpoint "w1" of every record made failed.
func failedEvents(prev, next *model.Task) *store.Event {
	if next.Status != model.StatusFailed || prev != nil && prev.Status == model.StatusFailed {
		return nil
	}
	return &store.Event{ID: "msg_" + next.ID, Body: []byte(`{"type":"task.failed"}`), Endpoints: []string{"w1"}}
}

// TestOutboxOneEngineDeliversEach: records written by 64 concurrent
// writers (lone writes and taskdeck_put batches) commit their events with
// them; two engines claiming the outbox at once get disjoint entries, all
// of them between the two; a failed attempt is claimed by neither until
// its retry time, and the counts say what each endpoint was told.
func TestOutboxOneEngineDeliversEach(t *testing.T) {
	conn := pgtest.DB(t)
	a, b := open(t, conn), open(t, conn)
	a.SetEvents(failedEvents)
	const n = 64
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			rec := model.NewIntent(model.ServerRef{Name: "s"}, "tool", nil, "", time.Now())
			rec.Status = model.StatusFailed
			if err := a.Create(rec); err != nil {
				t.Error(err)
			}
		})
	}
	// One the event function does not want: no row.
	calling := model.NewIntent(model.ServerRef{Name: "s"}, "tool", nil, "", time.Now())
	if err := a.Create(calling); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	var got [2][]store.OutboxEntry
	for i, s := range []*postgres.Store{a, b} {
		wg.Go(func() {
			e, err := s.Outbox(n, time.Minute)
			if err != nil {
				t.Error(err)
			}
			got[i] = e
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	for _, es := range got {
		for _, e := range es {
			if seen[e.ID] {
				t.Errorf("event %s claimed by both engines", e.ID)
			}
			seen[e.ID] = true
			if e.Endpoint != "w1" || string(e.Body) != `{"type":"task.failed"}` || e.Rev == 0 {
				t.Errorf("entry %+v", e)
			}
		}
	}
	if len(seen) != n {
		t.Fatalf("the two engines claimed %d events (%d and %d), want %d", len(seen), len(got[0]), len(got[1]), n)
	}
	if again, err := b.Outbox(n, time.Minute); err != nil || len(again) != 0 {
		t.Fatalf("claimed entries were claimed again: %d, %v", len(again), err)
	}
	all := append(got[0], got[1]...)
	if err := b.OutboxDone(all[0], store.Failed, "POST: 503", time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	for _, e := range all[1:] {
		if err := a.OutboxDone(e, store.Delivered, "", time.Time{}); err != nil {
			t.Fatal(err)
		}
	}
	if again, err := a.Outbox(n, time.Minute); err != nil || len(again) != 0 {
		t.Fatalf("an entry due in an hour was claimed: %d, %v", len(again), err)
	}
	st, err := b.OutboxStats()
	if err != nil {
		t.Fatal(err)
	}
	if w := st["w1"]; w.Delivered != n-1 || w.Pending != 1 || w.LastError != "POST: 503" || w.Failing {
		t.Errorf("stats %+v (failing is the last attempt's: a delivery came after the failure)", w)
	}
	if err := a.OutboxDone(all[0], store.Expired, "not delivered within the retry window", time.Time{}); err != nil {
		t.Fatal(err)
	}
	if st, err = a.OutboxStats(); err != nil || st["w1"].Pending != 0 || st["w1"].Expired != 1 {
		t.Errorf("stats after the expiry %+v, %v", st["w1"], err)
	}
	// A lone update (updateSQL) commits its event too.
	moved, err := a.Update(calling.ID, func(x *model.Task) (bool, error) { return true, x.MoveTo(model.StatusFailed, "", time.Now()) })
	if err != nil {
		t.Fatal(err)
	}
	if e, err := b.Outbox(n, time.Minute); err != nil || len(e) != 1 || e[0].Rev != moved.Revision || e[0].ID != "msg_"+calling.ID {
		t.Errorf("after a lone update: %+v, %v", e, err)
	}
}

// TestOutboxAddOnItsOwn: an event no change makes is claimed by one
// engine of two, under a Rev no change has, and goes once delivered.
func TestOutboxAddOnItsOwn(t *testing.T) {
	conn := pgtest.DB(t)
	a, b := open(t, conn), open(t, conn)
	if err := a.OutboxAdd(&store.Event{ID: "msg_solo", Body: []byte(`{}`), Endpoints: []string{"w1", "c1"}}); err != nil {
		t.Fatal(err)
	}
	rev, _, err := a.CountsAt()
	if err != nil {
		t.Fatal(err)
	}
	got, err := a.Outbox(10, time.Minute)
	if err != nil || len(got) != 2 || got[0].ID != "msg_solo" || got[0].Rev != got[1].Rev || got[0].Rev <= rev {
		t.Fatalf("claimed %+v (%v); want the event's two entries, at a Rev no change has (the last is %d)", got, err, rev)
	}
	if again, err := b.Outbox(10, time.Minute); err != nil || len(again) != 0 {
		t.Fatalf("the other engine claimed %+v (%v) while they were held", again, err)
	}
	for _, e := range got {
		if err := a.OutboxDone(e, store.Delivered, "", time.Time{}); err != nil {
			t.Fatal(err)
		}
	}
	st, err := b.OutboxStats()
	if err != nil || st["w1"].Pending != 0 || st["w1"].Delivered != 1 || st["c1"].Delivered != 1 {
		t.Fatalf("stats %+v (%v)", st, err)
	}
}

// TestOutboxSameHookListedTwice: a config that lists one command twice
// (once for failed, once for failed and input_required) tells it once of
// a failure, and the failing write commits: the outbox's row per event
// and endpoint is unique, so a duplicate endpoint must not reach it.
func TestOutboxSameHookListedTwice(t *testing.T) {
	c, err := mcpconfig.ParseConfig("c.json", []byte(`{"notify":{"commands":[
		{"argv":["notify-send","taskdeck"],"events":["failed"]},
		{"argv":["notify-send","taskdeck"],"events":["failed","input_required"]}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	s := open(t, pgtest.DB(t))
	s.SetEvents(notify.Events(c.Notify))
	rec := model.NewIntent(model.ServerRef{Name: "s"}, "tool", nil, "", time.Now())
	rec.Status = model.StatusFailed
	if err := s.Create(rec); err != nil {
		t.Fatalf("the failed task's write: %v", err)
	}
	if e, err := s.Outbox(10, time.Minute); err != nil || len(e) != 1 || e[0].Endpoint != c.Notify.Commands[0].Endpoint() {
		t.Errorf("outbox %+v, %v; want the hook's one entry", e, err)
	}
}

// TestOutboxBurstNotHeldForTheLease: a burst of events to one endpoint
// on a fleet. The engine delivering sends four at a time (its slots) and
// gives the rest back at once, so the other engine claims them while the
// four are in flight, rather than after the first engine's lease.
func TestOutboxBurstNotHeldForTheLease(t *testing.T) {
	release := make(chan struct{})
	var inFlight atomic.Int64
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inFlight.Add(1)
		<-release
	}))
	defer receiver.Close()
	defer close(release) // before the receiver's Close, which waits for its handlers
	c, err := mcpconfig.ParseConfig("c.json", fmt.Appendf(nil, `{"notify":{"webhooks":[
		{"url":%q,"secret":"${TD_TEST_SECRET}","events":["failed"]}]}}`, receiver.URL))
	if err != nil {
		t.Fatal(err)
	}
	conn := pgtest.DB(t)
	a, b := open(t, conn), open(t, conn)
	a.SetEvents(notify.Events(c.Notify))
	const burst = 10
	for range burst {
		rec := model.NewIntent(model.ServerRef{Name: "s"}, "tool", nil, "", time.Now())
		rec.Status = model.StatusFailed
		if err := a.Create(rec); err != nil {
			t.Fatal(err)
		}
	}
	// An attempt may take 5 minutes: the lease is longer than the test.
	d, err := notify.New(a, notify.Options{Notify: c.Notify, HTTPTimeout: 5 * time.Minute,
		Lookup: func(string) (string, bool) { return "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", true }})
	if err != nil {
		t.Fatal(err)
	}
	d.Start()
	defer d.Close()
	waitfor.Within(t, 10*time.Second, "four deliveries in flight", func() bool { return inFlight.Load() == 4 })
	claimed := map[string]bool{}
	waitfor.Within(t, 10*time.Second, "the other engine to claim the six not in flight", func() bool {
		got, err := b.Outbox(burst, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range got {
			claimed[e.ID] = true
		}
		return len(claimed) == burst-4
	})
}
