package engine

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/internal/hostile"
	"github.com/taskdeck/taskdeck/internal/pgtest"
	"github.com/taskdeck/taskdeck/internal/waitfor"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store"
)

// warnings counts the engine's log records by message.
type warnings struct {
	mu   sync.Mutex
	seen map[string][]time.Time
}

func (w *warnings) Enabled(context.Context, slog.Level) bool { return true }
func (w *warnings) WithAttrs([]slog.Attr) slog.Handler       { return w }
func (w *warnings) WithGroup(string) slog.Handler            { return w }
func (w *warnings) Handle(_ context.Context, r slog.Record) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen[r.Message] = append(w.seen[r.Message], time.Now())
	return nil
}

// after counts the records of msg logged after t.
func (w *warnings) after(msg string, t time.Time) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, at := range w.seen[msg] {
		if at.After(t) {
			n++
		}
	}
	return n
}

// pollReads counts the tracker's reads of records: each poll begins with
// one, so they count the polls tried, sent or not.
type pollReads struct {
	store.Backend
	mu  sync.Mutex
	ats []time.Time
}

func (r *pollReads) Get(id string) (*model.Task, error) {
	r.mu.Lock()
	r.ats = append(r.ats, time.Now())
	r.mu.Unlock()
	return r.Backend.Get(id)
}

func (r *pollReads) after(t time.Time) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, at := range r.ats {
		if at.After(t) {
			n++
		}
	}
	return n
}

// isStore admits the feed's word that the store is up (or lost).
func isStore(up bool) func(deck.Event) bool {
	return func(ev deck.Event) bool { return ev.Kind == deck.EventStore && ev.Store.Up == up }
}

// TestStoreLostPausesPolling: the database stops during a run. The feed
// says so at once (with the cause on one line), the engine sends no poll
// and tries no write while it is down, a watcher that comes meanwhile
// hears it first, and once the database is back the feed says so and
// every task is polled again at once and ends.
func TestStoreLostPausesPolling(t *testing.T) {
	srv := startDemo(t, demo.Options{Speed: 1, PollInterval: 50 * time.Millisecond, NoPush: true})
	polls := srv.RecordPolls("tasks/get", 0)
	logs := &warnings{seen: map[string][]time.Time{}}
	db := pgtest.DB(t)
	// The default lease: the claims outlast the outage, so that only the
	// pause stops the polls.
	e := open(t, t.TempDir(), srv, Options{Store: db, Claim: true, ClaimRenew: testRenew, Logger: slog.New(logs)})
	reads := &pollReads{Backend: e.tracker.store}
	e.tracker.store = reads // before the loop starts
	feed, err := e.Watch(ctxT(t), 0)
	if err != nil {
		t.Fatal(err)
	}
	const n = 8
	var tasks []*model.Task
	for range n {
		res, err := e.Call(ctxT(t), deck.CallRequest{Server: demoRef, Tool: "sleep", Args: json.RawMessage(`{"seconds":6}`)})
		if err != nil {
			t.Fatal(err)
		}
		tasks = append(tasks, res.Task)
	}
	waitFor(t, 10*time.Second, "every task polled", func() bool {
		for _, rec := range tasks {
			if len(polls.Of(rec.TaskID)) == 0 {
				return false
			}
		}
		return true
	})

	pgtest.Stop(t)
	lost := next(t, feed, 10*time.Second, "the feed's word that the store is lost", isStore(false))
	lostAt := time.Now()
	if lost.Store.Error == "" || strings.ContainsAny(lost.Store.Error, "\n\r") || time.Since(lost.Store.Since) > waitfor.Scale(10*time.Second) {
		t.Errorf("the loss reads %+v; want a one-line cause and when", *lost.Store)
	}
	late, err := e.Watch(ctxT(t), 0)
	if err != nil {
		t.Fatalf("a watch while the database is down: %v", err)
	}
	if ev := next(t, late, 5*time.Second, "a first event", func(deck.Event) bool { return true }); !isStore(false)(ev) {
		t.Errorf("a watcher that came while the database was down first heard %s, want the loss", ev.Kind)
	}
	// Down for a while (the claim rounds go on failing, every testRenew):
	// polls already sent when the loss was heard may end (grace), none
	// starts after.
	grace := lostAt.Add(time.Second)
	waitFor(t, 10*time.Second, "four claim rounds failed while the database is down", func() bool {
		return logs.after("claims could not be renewed or taken", grace) >= 4
	})
	sent := 0
	for _, rec := range tasks {
		for _, p := range polls.Of(rec.TaskID) {
			if p.At.After(grace) {
				sent++
			}
		}
	}
	if sent > 0 {
		t.Errorf("%d polls were sent while the database was down", sent)
	}
	if r := reads.after(grace); r > 0 {
		t.Errorf("the engine tried %d polls while the database was down", r)
	}

	_, err = e.Call(ctxT(t), deck.CallRequest{Server: demoRef, Tool: "sleep", Args: json.RawMessage(`{"seconds":1}`)})
	if de := kindIs(t, err, deck.KindStoreDown); de.TaskID != "" || !strings.Contains(de.Message, "nothing was recorded") || strings.Contains(de.Message, "\n") {
		t.Errorf("a call while the database is down failed with %q (task %q); want one line that says nothing was recorded", de.Message, de.TaskID)
	}

	pgtest.Start(t)
	next(t, feed, 15*time.Second, "the feed's word that the store is back", isStore(true))
	backAt := time.Now()
	next(t, late, 5*time.Second, "the late watcher's word that the store is back", isStore(true))
	snap := next(t, late, 5*time.Second, "the late watcher's replay", func(ev deck.Event) bool { return ev.Kind == deck.EventSnapshot })
	if len(snap.Entries) != n {
		t.Errorf("the late watcher's replay holds %d records, want %d", len(snap.Entries), n)
	}
	waitFor(t, 5*time.Second, "every task polled again after the database came back", func() bool {
		for _, rec := range tasks {
			ps := polls.Of(rec.TaskID)
			if !ps[len(ps)-1].At.After(backAt) {
				return false
			}
		}
		return true
	})
	waitFor(t, 20*time.Second, "every task completed", func() bool {
		c, err := e.store.Counts()
		return err == nil && c[model.StatusCompleted] == n
	})
	if all, err := e.store.All(); err != nil || len(all) != n {
		t.Errorf("%d records (%v) after the call refused while the database was down, want %d", len(all), err, n)
	}
}

// TestCallHandleLostWithTheDatabase: the database stops while the server
// makes the task, after the intent was committed: the call fails in one
// line that names the record (still calling) and the server's task id,
// the one place it is told.
func TestCallHandleLostWithTheDatabase(t *testing.T) {
	srv := startDemo(t, demo.Options{Speed: 1, NoPush: true})
	e := open(t, t.TempDir(), srv, Options{Store: pgtest.DB(t), Claim: true})
	var made string // the server's task id, as it answered
	srv.On("tools/call", func(w http.ResponseWriter, req *hostile.Request) bool {
		up := srv.Upstream(req)
		if m := regexp.MustCompile(`"taskId":"([^"]+)"`).FindStringSubmatch(up.Body.String()); m != nil {
			made = m[1]
		}
		pgtest.Stop(t)
		hostile.Send(w, up)
		return true
	})
	_, err := e.Call(ctxT(t), deck.CallRequest{Server: demoRef, Tool: "sleep", Args: json.RawMessage(`{"seconds":30}`)})
	de := kindIs(t, err, deck.KindStoreDown)
	if made == "" {
		t.Fatal("the server made no task")
	}
	if de.TaskID == "" || !strings.Contains(de.Message, made) || !strings.Contains(de.Message, de.TaskID+" stays calling") || strings.Contains(de.Message, "\n") {
		t.Errorf("the call failed with %q (record %q); want one line naming the record, still calling, and the server's task %s", de.Message, de.TaskID, made)
	}
	pgtest.Start(t)
	rec, err := e.store.Get(de.TaskID)
	if err != nil || rec.Status != model.StatusCalling {
		t.Errorf("the record after the database came back: %v %v, want it calling", rec, err)
	}
}
