package badger_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store"
	"github.com/taskdeck/taskdeck/store/badger"
)

// failedEvents tells endpoint "w1" and "c1" of every move to failed.
func failedEvents(prev, next *model.Task) *store.Event {
	if next.Status != model.StatusFailed || prev != nil && prev.Status == model.StatusFailed {
		return nil
	}
	return &store.Event{ID: "msg_" + next.ID, Body: []byte(`{"type":"task.failed"}`), Endpoints: []string{"w1", "c1"}}
}

// TestOutboxHoldsOnlyWhatIsUndelivered: a change some endpoint wants
// commits its event with the record (one txn: the record's revision names
// it); an entry delivered or expired goes, the event with its last entry,
// and the store then holds no more keys than it would without an outbox
// but the endpoints' counts. A failed attempt keeps the entry, due again at
// its retry time and not before.
func TestOutboxHoldsOnlyWhatIsUndelivered(t *testing.T) {
	s := newStore(t)
	s.SetEvents(failedEvents)
	rec := create(t, s, "k", model.StatusWorking, t0)
	got, err := s.Update(rec.ID, moveTo(model.StatusFailed, t0.Add(time.Minute)))
	must(t, err)
	entries, err := s.Outbox(10, 0)
	must(t, err)
	if len(entries) != 2 || entries[0].Rev != got.Revision || entries[0].ID != "msg_"+rec.ID || string(entries[0].Body) != `{"type":"task.failed"}` {
		t.Fatalf("outbox after the move to failed: %+v", entries)
	}
	byEndpoint := map[string]store.OutboxEntry{}
	for _, e := range entries {
		byEndpoint[e.Endpoint] = e
	}

	must(t, s.OutboxDone(byEndpoint["w1"], store.Failed, "POST: 503", time.Now().Add(time.Hour)))
	entries, err = s.Outbox(10, 0)
	must(t, err)
	if len(entries) != 1 || entries[0].Endpoint != "c1" {
		t.Fatalf("an entry due in an hour was returned: %+v", entries)
	}
	must(t, s.OutboxDone(byEndpoint["c1"], store.Delivered, "", time.Time{}))
	stats, err := s.OutboxStats()
	must(t, err)
	if w := stats["w1"]; w.Pending != 1 || !w.Failing || w.LastError != "POST: 503" {
		t.Errorf("w1's stats: %+v", w)
	}
	if c := stats["c1"]; c.Pending != 0 || c.Delivered != 1 || c.Failing {
		t.Errorf("c1's stats: %+v", c)
	}
	must(t, s.OutboxDone(byEndpoint["w1"], store.Expired, "not delivered within the retry window", time.Time{}))
	stats, err = s.OutboxStats()
	must(t, err)
	if w := stats["w1"]; w.Pending != 0 || w.Expired != 1 {
		t.Errorf("w1's stats after it expired: %+v", w)
	}
	keys, err := badger.Keys(s)
	must(t, err)
	for _, k := range keys {
		if strings.HasPrefix(k, "e\x00") || strings.HasPrefix(k, "o\x00") {
			t.Errorf("key %q left after every entry went", k)
		}
	}
	if !slices.Contains(keys, "O\x00w1") || !slices.Contains(keys, "O\x00c1") {
		t.Errorf("the endpoints' counts are gone: %q", keys)
	}
}

// TestNoEndpointNoOutbox: with no endpoint (no SetEvents, or events no
// endpoint wants) a change writes no outbox key.
func TestNoEndpointNoOutbox(t *testing.T) {
	s := newStore(t)
	rec := create(t, s, "k", model.StatusWorking, t0)
	_, err := s.Update(rec.ID, moveTo(model.StatusFailed, t0.Add(time.Minute)))
	must(t, err)
	s2 := newStore(t)
	s2.SetEvents(func(prev, next *model.Task) *store.Event { return nil })
	rec2 := create(t, s2, "k", model.StatusWorking, t0)
	_, err = s2.Update(rec2.ID, moveTo(model.StatusFailed, t0.Add(time.Minute)))
	must(t, err)
	for _, st := range []*badger.Store{s, s2} {
		keys, err := badger.Keys(st)
		must(t, err)
		for _, k := range keys {
			if k[0] == 'e' || k[0] == 'o' || k[0] == 'O' {
				t.Errorf("outbox key %q with no endpoint", k)
			}
		}
	}
}

// TestOutboxAddOnItsOwn: an event no change makes (a server's polls
// failing) is committed on its own, under a Rev no change has, delivered
// like any, and leaves no key once delivered.
func TestOutboxAddOnItsOwn(t *testing.T) {
	s := newStore(t)
	s.SetEvents(failedEvents)
	must(t, s.OutboxAdd(&store.Event{ID: "msg_solo", Body: []byte(`{"type":"server.polls_failing"}`), Endpoints: []string{"w1"}}))
	rec := create(t, s, "k", model.StatusWorking, t0)
	moved, err := s.Update(rec.ID, moveTo(model.StatusFailed, t0.Add(time.Minute)))
	must(t, err)
	entries, err := s.Outbox(10, 0)
	must(t, err)
	var solo []store.OutboxEntry
	for _, e := range entries {
		if e.ID == "msg_solo" {
			solo = append(solo, e)
		} else if e.Rev != moved.Revision {
			t.Errorf("the change's entry %+v is not at its revision %d", e, moved.Revision)
		}
	}
	if len(entries) != 3 || len(solo) != 1 || solo[0].Rev == moved.Revision || solo[0].Endpoint != "w1" || string(solo[0].Body) != `{"type":"server.polls_failing"}` {
		t.Fatalf("outbox: %+v; want the change's two entries and the one added on its own", entries)
	}
	for _, e := range entries {
		must(t, s.OutboxDone(e, store.Delivered, "", time.Time{}))
	}
	keys, err := badger.Keys(s)
	must(t, err)
	for _, k := range keys {
		if strings.HasPrefix(k, "e\x00") || strings.HasPrefix(k, "o\x00") {
			t.Errorf("key %q left after every entry went", k)
		}
	}
}

// TestBigEventSyncsTheValueLog: an event body past Badger's value
// threshold goes to the value log, which the WAL sync after each commit
// does not cover; its commit syncs the value log too, as a big record's
// does, whether the event comes with a record (a small one) or on its own
// (OutboxAdd). A small event's commit syncs the WAL alone. Without the
// event's size counted, the big ones' commits did not sync the value log.
func TestBigEventSyncsTheValueLog(t *testing.T) {
	s := newStore(t)
	if badger.SyncedWAL(s) == "" {
		t.Skip("the store syncs with db.Sync on every commit here")
	}
	big := []byte(`{"type":"task.failed","pad":"` + strings.Repeat("x", 200<<10) + `"}`)
	body := []byte(`{"type":"task.failed"}`)
	s.SetEvents(func(prev, next *model.Task) *store.Event {
		if ev := failedEvents(prev, next); ev != nil {
			ev.Body = body
			return ev
		}
		return nil
	})
	var syncs int
	badger.OnDBSync(s, func() { syncs++ })
	small := create(t, s, "small", model.StatusWorking, t0)
	_, err := s.Update(small.ID, moveTo(model.StatusFailed, t0.Add(time.Minute)))
	must(t, err)
	if syncs != 0 {
		t.Fatalf("a small record and event synced the value log %d times; want the WAL alone", syncs)
	}
	body = big
	rec := create(t, s, "big", model.StatusWorking, t0)
	_, err = s.Update(rec.ID, moveTo(model.StatusFailed, t0.Add(time.Minute)))
	must(t, err)
	if syncs != 1 {
		t.Fatalf("the commit of a %d-byte event synced the value log %d times; want once", len(big), syncs)
	}
	must(t, s.OutboxAdd(&store.Event{ID: "msg_alone", Body: big, Endpoints: []string{"w1"}}))
	if syncs != 2 {
		t.Fatalf("OutboxAdd of a %d-byte event: the value log synced %d times in all; want twice", len(big), syncs)
	}
	entries, err := s.Outbox(10, 0)
	must(t, err)
	var whole int
	for _, e := range entries {
		if string(e.Body) == string(big) {
			whole++
		}
	}
	if whole != 3 { // w1 and c1 of the update, w1 of OutboxAdd
		t.Errorf("%d of %d outbox entries hold the big body whole; want 3", whole, len(entries))
	}
}
