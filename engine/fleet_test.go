package engine

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/internal/hostile"
	"github.com/taskdeck/taskdeck/internal/pgtest"
	mcpconfig "github.com/taskdeck/taskdeck/mcpclient/config"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store/postgres"
)

// The fleet tests' leases are short, so that a takeover is quick to see;
// the renewal is well inside, as by default (10 s, every 3 s).
const (
	testLease = 2 * time.Second
	testRenew = 500 * time.Millisecond
)

// fleet opens n engines on one fresh database, each with its own data
// dir, the loop running, with claims of lease renewed every renew.
func fleet(t *testing.T, srv *hostile.Server, n int, lease, renew time.Duration) (string, []*Engine) {
	t.Helper()
	db := pgtest.DB(t)
	var out []*Engine
	for i := range n {
		// Each engine's URL carries its name, for the server to tell them apart.
		cfg, err := mcpconfig.ParseConfig("test.json", fmt.Appendf(nil, `{"mcpServers":{"demo":{"url":%q}}}`, fmt.Sprintf("%s?engine=%d", srv.URL, i)))
		if err != nil {
			t.Fatal(err)
		}
		e := open(t, t.TempDir(), srv, Options{Store: db, Config: cfg, ClaimLease: lease, ClaimRenew: renew})
		if err := e.PollNow(ctxT(t), nil); err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return db, out
}

// launchAll calls sleep n times, round robin over the engines, and returns
// the records.
func launchAll(t *testing.T, es []*Engine, n int, seconds float64) []*model.Task {
	t.Helper()
	var out []*model.Task
	for i := range n {
		res, err := es[i%len(es)].Call(ctxT(t), deck.CallRequest{Server: demoRef, Tool: "sleep", Args: json.RawMessage(fmt.Sprintf(`{"seconds":%g}`, seconds))})
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		out = append(out, res.Task)
	}
	return out
}

// completed counts the records of tasks that completed, read through e.
func completed(t *testing.T, e *Engine) int {
	t.Helper()
	counts, err := e.store.Counts()
	if err != nil {
		t.Fatal(err)
	}
	return counts[model.StatusCompleted]
}

// TestFleetThreeEnginesShareTheTasks: three engines on one database poll
// 300 tasks one of them made to the end between them, each task by one
// engine only.
func TestFleetThreeEnginesShareTheTasks(t *testing.T) {
	srv := startDemo(t, demo.Options{Speed: 0.2, PollInterval: 50 * time.Millisecond, NoPush: true})
	polls := srv.RecordPolls("tasks/get", 2*time.Millisecond)
	// The default lease: a short one could run out under -race on a busy
	// machine, and hand a task over while no engine died.
	_, es := fleet(t, srv, 3, DefaultClaimLease, DefaultClaimRenew)
	const n = 300
	tasks := launchAll(t, es[:1], n, 2)
	waitFor(t, 120*time.Second, fmt.Sprintf("all %d tasks completed", n), func() bool { return completed(t, es[0]) == n })

	if o := polls.Overlap(); o > 1 {
		t.Errorf("%d polls of one task were in flight at once: two engines polled it at the same moment", o)
	}
	sessions := polls.Senders()
	perEngine := map[string]int{}
	for _, rec := range tasks {
		if k := sessions[rec.TaskID]; k != 1 {
			t.Errorf("task %s was polled by %d engines, want 1 (no engine died)", rec.ID, k)
		}
		if ps := polls.Of(rec.TaskID); len(ps) > 0 {
			perEngine[ps[0].From]++
		}
	}
	if len(perEngine) != 3 {
		t.Errorf("the tasks were polled by %d engines, want all 3: %v", len(perEngine), perEngine)
	}
	t.Logf("tasks per engine: %v; tasks/get: %d", perEngine, gets(srv))
}

// TestFleetDeadEngineTasksTakenOver: an engine that stops without a word
// leaves its claims to run out; the others poll its tasks within the lease
// (plus one renewal round) and see them to the end.
func TestFleetDeadEngineTasksTakenOver(t *testing.T) {
	srv := startDemo(t, demo.Options{Speed: 1, PollInterval: 50 * time.Millisecond, NoPush: true})
	polls := srv.RecordPolls("tasks/get", 0)
	_, es := fleet(t, srv, 3, testLease, testRenew)
	const n = 60
	tasks := launchAll(t, es, n, 6)
	dead := es[0]
	waitFor(t, 10*time.Second, "the first engine claims some tasks", func() bool {
		dead.claims.mu.Lock()
		defer dead.claims.mu.Unlock()
		return len(dead.claims.held) > 0
	})
	dead.claims.mu.Lock()
	orphaned := map[string]bool{}
	for id := range dead.claims.held {
		orphaned[id] = true
	}
	dead.claims.mu.Unlock()
	// Close leaves the leases in the database as a SIGKILL would: the
	// claims are not released, only no longer renewed.
	died := time.Now()
	if err := dead.Close(); err != nil {
		t.Fatal(err)
	}
	within := testLease + testRenew + time.Second
	for _, rec := range tasks {
		if !orphaned[rec.ID] {
			continue
		}
		// A task the dead engine saw to its end just before it died has
		// nothing left to poll (on a loaded machine the first ones can end
		// while the last are launched).
		if e, err := es[1].Get(ctxT(t), rec.ID); err == nil && e.Task.Status.Terminal() {
			continue
		}
		waitFor(t, within+5*time.Second, "task "+rec.ID+" polled again after its engine died", func() bool {
			ps := polls.Of(rec.TaskID)
			return len(ps) > 0 && ps[len(ps)-1].At.After(died)
		})
	}
	var worst time.Duration
	for _, rec := range tasks {
		if !orphaned[rec.ID] {
			continue
		}
		for _, p := range polls.Of(rec.TaskID) {
			if p.At.After(died) {
				worst = max(worst, p.At.Sub(died))
				break
			}
		}
	}
	if worst > within {
		t.Errorf("the dead engine's tasks were polled again after up to %v, want within %v (the lease %v, renewed every %v)", worst, within, testLease, testRenew)
	}
	t.Logf("%d tasks of the dead engine, all polled again within %v of its death", len(orphaned), worst.Round(time.Millisecond))
	waitFor(t, 30*time.Second, "every task completed", func() bool { return completed(t, es[1]) == n })
}

// TestFleetFeedsSeeEachOther: a call and a cancel made by one engine show
// in another engine's feed within a second.
func TestFleetFeedsSeeEachOther(t *testing.T) {
	srv := startDemo(t, demo.Options{Speed: 1, PollInterval: 50 * time.Millisecond, NoPush: true})
	_, es := fleet(t, srv, 2, testLease, testRenew)
	feed, err := es[1].Watch(ctxT(t), 0)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	res, err := es[0].Call(ctxT(t), deck.CallRequest{Server: demoRef, Tool: "sleep", Args: json.RawMessage(`{"seconds":30}`)})
	if err != nil {
		t.Fatal(err)
	}
	next(t, feed, time.Second, "the other engine's call in the feed", about(res.Task.ID, deck.EventChange))
	t.Logf("the call showed after %v", time.Since(start).Round(time.Millisecond))
	start = time.Now()
	if _, err := es[0].Cancel(ctxT(t), res.Task.ID); err != nil {
		t.Fatal(err)
	}
	next(t, feed, time.Second, "the other engine's cancel in the feed", func(ev deck.Event) bool {
		for _, en := range ev.Entries {
			if en.Task.ID == res.Task.ID && en.Task.Status == model.StatusCancelled {
				return true
			}
		}
		return false
	})
	t.Logf("the cancel showed after %v", time.Since(start).Round(time.Millisecond))
}

// TestFleetDatabaseRestart: the database stops and starts during a run;
// no record is lost and the engines poll every task to the end.
func TestFleetDatabaseRestart(t *testing.T) {
	srv := startDemo(t, demo.Options{Speed: 1, PollInterval: 50 * time.Millisecond, NoPush: true})
	_, es := fleet(t, srv, 2, testLease, testRenew)
	const n = 40
	tasks := launchAll(t, es, n, 3)
	waitFor(t, 10*time.Second, "a first poll", func() bool { return gets(srv) > 0 })
	if c := completed(t, es[0]); c == n {
		t.Fatalf("all %d tasks completed before the restart; the test shows nothing", c)
	}
	pgtest.Restart(t, nil)
	waitFor(t, 40*time.Second, "every task completed after the restart", func() bool {
		c, err := es[0].store.Counts()
		return err == nil && c[model.StatusCompleted] == n
	})
	for _, rec := range tasks {
		got, err := es[1].store.Get(rec.ID)
		if err != nil {
			t.Fatalf("record %s after the restart: %v", rec.ID, err)
		}
		if got.Status != model.StatusCompleted {
			t.Errorf("task %s: %s, want completed", rec.ID, got.Status)
		}
	}
}

// TestFleetLostClaimStopsPolling: an engine whose lease ran out (it did
// not renew in time) while another took the task has its next write of a
// poll result refused, and stops polling the task; the other polls it to
// the end.
func TestFleetLostClaimStopsPolling(t *testing.T) {
	srv := startDemo(t, demo.Options{Speed: 1, PollInterval: 50 * time.Millisecond, NoPush: true})
	polls := srv.RecordPolls("tasks/get", 0)
	db := pgtest.DB(t)
	engineCfg := func(i int) *mcpconfig.Config {
		cfg, err := mcpconfig.ParseConfig("test.json", fmt.Appendf(nil, `{"mcpServers":{"demo":{"url":%q}}}`, fmt.Sprintf("%s?engine=%d", srv.URL, i)))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	// The slow engine takes its claims at once and then renews too late.
	slow := open(t, t.TempDir(), srv, Options{Store: db, Config: engineCfg(0), ClaimLease: time.Second, ClaimRenew: time.Minute})
	if err := slow.PollNow(ctxT(t), nil); err != nil {
		t.Fatal(err)
	}
	res, err := slow.Call(ctxT(t), deck.CallRequest{Server: demoRef, Tool: "sleep", Args: json.RawMessage(`{"seconds":4}`)})
	if err != nil {
		t.Fatal(err)
	}
	id, taskID := res.Task.ID, res.Task.TaskID
	waitFor(t, 5*time.Second, "the slow engine polls its task", func() bool { return len(polls.Of(taskID)) > 0 })
	other := open(t, t.TempDir(), srv, Options{Store: db, Config: engineCfg(1), ClaimLease: testLease, ClaimRenew: 200 * time.Millisecond})
	if err := other.PollNow(ctxT(t), nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 15*time.Second, "the task completed", func() bool {
		rec, err := other.store.Get(id)
		return err == nil && rec.Status == model.StatusCompleted
	})
	var slowLast, otherFirst time.Time
	for _, p := range polls.Of(taskID) {
		switch {
		case p.From == "engine=0":
			slowLast = p.At
		case otherFirst.IsZero():
			otherFirst = p.At
		}
	}
	if otherFirst.IsZero() {
		t.Fatal("the other engine never polled the task")
	}
	// The slow engine's next change (progress, once a second) is refused.
	if late := slowLast.Sub(otherFirst); late > 1500*time.Millisecond {
		t.Errorf("the slow engine still polled %v after the other took the task over", late.Round(time.Millisecond))
	}
	if o := polls.Overlap(); o > 1 {
		t.Errorf("%d polls of the task were in flight at once", o)
	}
}

// TestFleetCrashedIntentBecomesOrphaned: on a shared database, a call's
// intent whose engine died before the handle came (a `calling` record
// older than any call can take) is turned into `orphaned` by the engine
// that claims it, as a restart does on one host: shown to the operator,
// never re-sent, and then left unclaimed.
func TestFleetCrashedIntentBecomesOrphaned(t *testing.T) {
	srv := startDemo(t, demo.Options{})
	db, es := fleet(t, srv, 1, testLease, testRenew)
	st, err := postgres.Open(ctxT(t), db, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	intent := model.NewIntent(demoRef, "sleep", json.RawMessage(`{"seconds":1}`), "", time.Now().Add(-2*time.Hour))
	if err := st.Create(intent); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the crashed intent orphaned", func() bool {
		e, err := es[0].Get(ctxT(t), intent.ID)
		return err == nil && e.Task.Status == model.StatusOrphaned
	})
	if n := srv.Calls("sleep"); n != 0 {
		t.Fatalf("%d tools/call of the crashed intent's tool: an orphan is never re-sent", n)
	}
}
