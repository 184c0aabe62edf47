package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/internal/hostile"
	"github.com/taskdeck/taskdeck/internal/pgtest"
	"github.com/taskdeck/taskdeck/internal/waitfor"
	mcpconfig "github.com/taskdeck/taskdeck/mcpclient/config"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store"
	"github.com/taskdeck/taskdeck/store/postgres"
)

// The fleet tests' leases are short, so that a takeover is quick to see;
// the renewal is well inside, as by default (7 s, every 2 s).
const (
	testLease = 2 * time.Second
	testRenew = 500 * time.Millisecond
)

// openFleet opens n engines on one fresh database, each with its own data
// dir, the loop running, with claims of lease renewed every renew.
func openFleet(t *testing.T, srv *hostile.Server, n int, lease, renew time.Duration) (string, []*Engine) {
	t.Helper()
	db := pgtest.DB(t)
	var out []*Engine
	for i := range n {
		// Each engine's URL carries its name, for the server to tell them apart.
		cfg, err := mcpconfig.ParseConfig("test.json", fmt.Appendf(nil, `{"mcpServers":{"demo":{"url":%q}}}`, fmt.Sprintf("%s?engine=%d", srv.URL, i)))
		if err != nil {
			t.Fatal(err)
		}
		e := open(t, t.TempDir(), srv, Options{Store: db, Claim: true, Config: cfg, ClaimLease: lease, ClaimRenew: renew})
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
	_, es := openFleet(t, srv, 3, DefaultClaimLease, DefaultClaimRenew)
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
// and see them to the end.
func TestFleetDeadEngineTasksTakenOver(t *testing.T) {
	srv := startDemo(t, demo.Options{Speed: 1, PollInterval: 50 * time.Millisecond, NoPush: true})
	polls := srv.RecordPolls("tasks/get", 0)
	_, es := openFleet(t, srv, 3, testLease, testRenew)
	const n = 60
	tasks := launchAll(t, es, n, 6)
	dead := es[0]
	waitFor(t, 10*time.Second, "the first engine claims some tasks", func() bool {
		return len(dead.claims.View().Held) > 0
	})
	orphaned := map[string]bool{}
	for _, id := range dead.claims.View().Held {
		orphaned[id] = true
	}
	// Close leaves the leases in the database as a SIGKILL would: the
	// claims are not released, only no longer renewed.
	died := time.Now()
	if err := dead.Close(); err != nil {
		t.Fatal(err)
	}
	// The others' rounds wake when the dead engine's leases run out: its
	// tasks are claimed within the lease of its last renewal, plus a
	// second for a poll to go out on a loaded machine under -race.
	within := testLease + waitfor.Scale(time.Second)
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
	_, es := openFleet(t, srv, 2, testLease, testRenew)
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
	_, es := openFleet(t, srv, 2, testLease, testRenew)
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
	slow := open(t, t.TempDir(), srv, Options{Store: db, Claim: true, Config: engineCfg(0), ClaimLease: time.Second, ClaimRenew: time.Minute})
	if err := slow.PollNow(ctxT(t), nil); err != nil {
		t.Fatal(err)
	}
	res, err := slow.Call(ctxT(t), deck.CallRequest{Server: demoRef, Tool: "sleep", Args: json.RawMessage(`{"seconds":4}`)})
	if err != nil {
		t.Fatal(err)
	}
	id, taskID := res.Task.ID, res.Task.TaskID
	waitFor(t, 5*time.Second, "the slow engine polls its task", func() bool { return len(polls.Of(taskID)) > 0 })
	other := open(t, t.TempDir(), srv, Options{Store: db, Claim: true, Config: engineCfg(1), ClaimLease: testLease, ClaimRenew: 200 * time.Millisecond})
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
	db, es := openFleet(t, srv, 1, testLease, testRenew)
	st, err := postgres.Open(ctxT(t), db, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	intent := model.NewIntent(demoRef, "sleep", json.RawMessage(`{"seconds":1}`), "", time.Now().Add(-2*time.Hour))
	if err := st.Create(intent); err != nil {
		t.Fatal(err)
	}
	// Written two hours ago by the database's clock, the one ages are judged on.
	conn, err := pgx.Connect(ctxT(t), db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctxT(t), `UPDATE taskdeck_tasks SET written_at = now() - interval '2 hours' WHERE id = $1`, intent.ID); err != nil {
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

// fleetCfg names the demo server "demo" for engine i, the URL's query
// telling the engines apart on the server side.
func fleetCfg(t *testing.T, srv *hostile.Server, i int) *mcpconfig.Config {
	t.Helper()
	cfg, err := mcpconfig.ParseConfig("test.json", fmt.Appendf(nil, `{"mcpServers":{"demo":{"url":%q}}}`, fmt.Sprintf("%s?engine=%d", srv.URL, i)))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestFleetLostClaimCannotOverwrite: an engine that lost its claim on a
// task (its lease ran out and another engine took it) cannot write what
// it hears about the task by any path: a pushed state, a poll made
// outside its schedule (Cancel's, Answer's), and its Cancel leaves the
// polling to the engine that watches the task.
func TestFleetLostClaimCannotOverwrite(t *testing.T) {
	srv := startDemo(t, demo.Options{Speed: 1, PollInterval: 50 * time.Millisecond, NoPush: true})
	polls := srv.RecordPolls("tasks/get", 0)
	db := pgtest.DB(t)
	// The slow engine takes its claim at once and then renews too late.
	slow := open(t, t.TempDir(), srv, Options{Store: db, Claim: true, Config: fleetCfg(t, srv, 0), ClaimLease: time.Second, ClaimRenew: time.Minute})
	if err := slow.PollNow(ctxT(t), nil); err != nil {
		t.Fatal(err)
	}
	res, err := slow.Call(ctxT(t), deck.CallRequest{Server: demoRef, Tool: "sleep", Args: json.RawMessage(`{"seconds":30}`)})
	if err != nil {
		t.Fatal(err)
	}
	id, taskID := res.Task.ID, res.Task.TaskID
	waitFor(t, 5*time.Second, "the slow engine polls its task", func() bool { return len(polls.Of(taskID)) > 0 })
	// The other engine polls once as it takes the task over, then not for
	// 5 s: a poll of its own amid the slow engine's would leave that one
	// nothing to write (the record already says it), not a write refused.
	rare := model.PollPolicy{Default: 5 * time.Second, Floor: 5 * time.Second, Cap: 5 * time.Second, Growth: 1}
	// Its lease is long: on a busy machine a short one can lapse between
	// renewals, and the slow engine would then take the task back and
	// write by right.
	other := open(t, t.TempDir(), srv, Options{Store: db, Claim: true, Config: fleetCfg(t, srv, 1), ClaimLease: time.Minute, ClaimRenew: 200 * time.Millisecond, Policy: rare})
	if err := other.PollNow(ctxT(t), nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the other engine takes the task over", func() bool { return other.claims.Holds(id) })

	// A pushed state, as the slow engine's stream would apply it.
	const stale = "a stale word pushed to the engine that lost the claim"
	_, err = slow.tracker.Pushed(id, model.Snapshot{TaskID: taskID, Status: model.StatusWorking, StatusMessage: stale})
	if !errors.Is(err, store.ErrFenced) {
		t.Fatalf("the slow engine's pushed state: %v, want it refused (claim lost)", err)
	}
	if after, err := other.store.Get(id); err != nil || after.StatusMessage == stale {
		t.Fatalf("the record after the refused push: %q, %v", after.StatusMessage, err)
	}
	// Both show in the engines' stats (the metrics' source).
	if st, err := slow.Stats(); err != nil || st.Fleet == nil || st.Fleet.Fenced < 1 {
		t.Errorf("the slow engine's stats after a write refused: %+v, %v; want it counted", st.Fleet, err)
	}
	if st, err := other.Stats(); err != nil || st.Fleet == nil || st.Fleet.TakenOver != 1 || st.Fleet.Claims != 1 || st.Fleet.Fenced != 0 {
		t.Errorf("the other engine's stats after its takeover: %+v, %v; want 1 lease taken over, 1 claim, no fenced write", st.Fleet, err)
	}

	// A poll outside the schedule (the one Cancel and Answer make): the
	// task's progress changes every second, so within a few polls one
	// has something to write, and that write is refused.
	waitFor(t, 5*time.Second, "a poll by the slow engine with something to write", func() bool {
		res, err := slow.tracker.Poll(ctxT(t), id)
		switch {
		case errors.Is(err, store.ErrFenced):
			return true
		case err != nil:
			t.Fatalf("the slow engine's poll: %v", err)
		case res.Changed:
			t.Fatalf("the slow engine, which lost the claim, wrote its poll of the task: %q", res.Task.StatusMessage)
		}
		return false
	})

	// Its Cancel goes to the server; the engine that watches the task
	// records the outcome, and the slow one sends no tasks/get for it.
	asked := time.Now()
	rec, err := slow.Cancel(ctxT(t), id)
	if err != nil {
		t.Fatalf("cancel from the engine that lost the claim: %v", err)
	}
	if !rec.CancelRequested {
		t.Errorf("the cancel's record: %+v, want cancel requested", rec)
	}
	waitFor(t, 10*time.Second, "the watching engine records the cancel", func() bool {
		rec, err := other.store.Get(id)
		return err == nil && rec.Status == model.StatusCancelled
	})
	for _, p := range polls.Of(taskID) {
		if p.From == "engine=0" && p.At.After(asked) {
			t.Errorf("the slow engine polled the task at %v, after its cancel: two engines polled one task", p.At.Sub(asked).Round(time.Millisecond))
		}
	}
}

// TestFleetShowsWhichEngineWatches: every engine on the database, also
// one whose loop does not run (a one-shot command), names the engine
// that watches a task, and the name moves, in the feed too, when that
// engine dies and another takes the task.
func TestFleetShowsWhichEngineWatches(t *testing.T) {
	srv := startDemo(t, demo.Options{Speed: 1, PollInterval: 50 * time.Millisecond, NoPush: true})
	db, es := openFleet(t, srv, 2, testLease, testRenew)
	oneShot := open(t, t.TempDir(), srv, Options{Store: db, Config: fleetCfg(t, srv, 9), ClaimLease: testLease, ClaimRenew: testRenew})
	res, err := es[0].Call(ctxT(t), deck.CallRequest{Server: demoRef, Tool: "sleep", Args: json.RawMessage(`{"seconds":30}`)})
	if err != nil {
		t.Fatal(err)
	}
	id := res.Task.ID
	watcherIn := func(e *Engine) string {
		en, err := e.Get(ctxT(t), id)
		if err != nil {
			t.Fatal(err)
		}
		if en.Poll.NoEngine {
			t.Errorf("the task shows as out of every engine's reach, while two have its server")
		}
		return en.Poll.Watcher
	}
	var watching, surviving *Engine
	waitFor(t, 10*time.Second, "an engine claims the task", func() bool {
		for i, e := range es {
			if e.claims.Holds(id) {
				watching, surviving = e, es[1-i]
				return true
			}
		}
		return false
	})
	name := watching.claims.Name()
	waitFor(t, 5*time.Second, "every engine names the watching one", func() bool {
		return watcherIn(es[0]) == name && watcherIn(es[1]) == name && watcherIn(oneShot) == name
	})
	feed, err := surviving.Watch(ctxT(t), 0)
	if err != nil {
		t.Fatal(err)
	}
	died := time.Now()
	if err := watching.Close(); err != nil { // its claim stays, as after a SIGKILL
		t.Fatal(err)
	}
	next(t, feed, testLease+3*time.Second, "the feed naming the engine that took the task over", func(ev deck.Event) bool {
		for _, en := range ev.Entries {
			if en.Task.ID == id && en.Poll.Watcher == surviving.claims.Name() {
				return true
			}
		}
		return false
	})
	t.Logf("the watcher moved in the feed %v after the first engine died", time.Since(died).Round(time.Millisecond))
	waitFor(t, 5*time.Second, "the one-shot engine names the new watcher", func() bool { return watcherIn(oneShot) == surviving.claims.Name() })
}

// TestFleetTaskNoEngineCanReach: a task whose server is in no live
// engine's config, or an ad-hoc URL no live engine called, shows as out
// of every engine's reach; an ad-hoc call is claimed, polled to its end
// and shown as watched by the engine that made it, and by no other.
func TestFleetTaskNoEngineCanReach(t *testing.T) {
	srv := startDemo(t, demo.Options{Speed: 1, PollInterval: 50 * time.Millisecond, NoPush: true})
	db, es := openFleet(t, srv, 2, testLease, testRenew)
	e := es[0]
	st, err := postgres.Open(ctxT(t), db, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Now()
	elsewhere := model.NewIntent(model.ServerRef{Name: "elsewhere"}, "sleep", json.RawMessage(`{}`), "", now)
	adhoc := model.NewIntent(model.ServerRef{URL: "http://127.0.0.1:9/mcp"}, "sleep", json.RawMessage(`{}`), "", now)
	for _, rec := range []*model.Task{elsewhere, adhoc} {
		if err := rec.MoveTo(model.StatusWorking, "", now); err != nil {
			t.Fatal(err)
		}
		if err := st.Create(rec); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 5*time.Second, "both shown out of every engine's reach", func() bool {
		a, err1 := e.Get(ctxT(t), elsewhere.ID)
		b, err2 := e.Get(ctxT(t), adhoc.ID)
		return err1 == nil && err2 == nil && a.Poll.NoEngine && b.Poll.NoEngine
	})

	call, err := e.Call(ctxT(t), deck.CallRequest{Server: model.ServerRef{URL: srv.URL}, Tool: "sleep", Args: json.RawMessage(`{"seconds":2}`)})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the ad-hoc call watched by the engine that made it", func() bool {
		en, err := e.Get(ctxT(t), call.Task.ID)
		return err == nil && en.Poll.Watcher == e.claims.Name() && !en.Poll.NoEngine
	})
	waitFor(t, 15*time.Second, "the ad-hoc call polled to its end", func() bool {
		en, err := e.Get(ctxT(t), call.Task.ID)
		return err == nil && en.Task.Status == model.StatusCompleted
	})
	if slices.Contains(es[1].claims.Claimable(), srv.URL) {
		t.Errorf("the other engine, which never called %s, claims its tasks", srv.URL)
	}
	if en, err := e.Get(ctxT(t), elsewhere.ID); err != nil || !en.Poll.NoEngine || en.Poll.Watcher != "" {
		t.Errorf("the task of a server no engine has: %+v, %v; want it out of reach, unwatched", en.Poll, err)
	}
}

// TestFleetActsElsewhereShowAtOnce: a cancel or an answer made on an
// engine that does not watch the task (it leaves the polls to the
// watcher) shows its outcome on it within a second, though the server
// asks for polls only every 5 s: the watcher hears of the act in the
// database's feed and polls at once.
func TestFleetActsElsewhereShowAtOnce(t *testing.T) {
	srv := startDemo(t, demo.Options{Speed: 1, PollInterval: 5 * time.Second, NoPush: true})
	_, es := openFleet(t, srv, 2, testLease, testRenew)
	launch := func(tool, args string) (string, *Engine) {
		res, err := es[0].Call(ctxT(t), deck.CallRequest{Server: demoRef, Tool: tool, Args: json.RawMessage(args)})
		if err != nil {
			t.Fatal(err)
		}
		var elsewhere *Engine
		waitFor(t, 10*time.Second, "an engine claims the task", func() bool {
			for i, e := range es {
				if e.claims.Holds(res.Task.ID) {
					elsewhere = es[1-i]
					return true
				}
			}
			return false
		})
		return res.Task.ID, elsewhere
	}
	outcome := func(e *Engine, id string, act func() error, want model.Status) {
		t.Helper()
		feed, err := e.Watch(ctxT(t), 0)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if err := act(); err != nil {
			t.Fatal(err)
		}
		next(t, feed, time.Second, fmt.Sprintf("the task %s on the engine that acted", want), func(ev deck.Event) bool {
			for _, en := range ev.Entries {
				if en.Task.ID == id && en.Task.Status == want {
					return true
				}
			}
			return false
		})
		t.Logf("%s on the other engine after %v", want, time.Since(start).Round(time.Millisecond))
	}

	id, elsewhere := launch("sleep", `{"seconds":60}`)
	outcome(elsewhere, id, func() error { _, err := elsewhere.Cancel(ctxT(t), id); return err }, model.StatusCancelled)

	id, elsewhere = launch("approve", `{"action":"deploy"}`)
	waitFor(t, 10*time.Second, "the approval asks for input", func() bool {
		en, err := elsewhere.Get(ctxT(t), id)
		return err == nil && en.Task.Status == model.StatusInputRequired
	})
	answer := map[string]json.RawMessage{"approve-1": json.RawMessage(`{"action":"accept","content":{"approve":true,"reason":"ok"}}`)}
	outcome(elsewhere, id, func() error { _, err := elsewhere.Answer(ctxT(t), id, answer); return err }, model.StatusCompleted)
}

// dyingEngineEnv, set in the test binary's environment, makes
// TestFleetDyingEngineProcess an engine's process that calls sleep and
// blocks in the call until it is killed: a host that dies mid-call. Its
// value is "<database> <server URL>" (neither has a space).
const dyingEngineEnv = "TASKDECK_TEST_DYING_ENGINE"

// TestFleetDyingEngineProcess is the dying engine's process (see
// dyingEngineEnv); in a normal run it does nothing.
func TestFleetDyingEngineProcess(t *testing.T) {
	db, url, ok := strings.Cut(os.Getenv(dyingEngineEnv), " ")
	if !ok {
		t.Skip("only run as the dying engine's process")
	}
	cfg, err := mcpconfig.ParseConfig("test.json", fmt.Appendf(nil, `{"mcpServers":{"demo":{"url":%q}}}`, url))
	if err != nil {
		t.Fatal(err)
	}
	// No loop (a one-off `call`): only the call path keeps it alive.
	e, err := Open(Options{DataDir: t.TempDir(), Store: db, Config: cfg, ClaimLease: testLease, ClaimRenew: testRenew, RequestTimeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.Call(context.Background(), deck.CallRequest{Server: demoRef, Tool: "sleep", Args: json.RawMessage(`{"seconds":1}`)})
	t.Fatalf("the call returned (%v): it was to block until the process is killed", err)
}

// TestFleetDeadEnginesIntentOrphanedAtOnce: an engine's process killed
// while its tools/call is in flight leaves the intent `calling`; another
// engine orphans it within a claim round of the dead engine's heartbeat
// running out (≤ lease + 2 s of the kill), not after the age of a call
// (2 × the request timeout + the lease, over a minute here), and sends
// nothing again.
func TestFleetDeadEnginesIntentOrphanedAtOnce(t *testing.T) {
	srv := startDemo(t, demo.Options{})
	srv.Hold("tools/call") // never answered: the call is in flight when the process dies
	db := pgtest.DB(t)
	survivor := open(t, t.TempDir(), srv, Options{Store: db, Claim: true, Config: fleetCfg(t, srv, 0), ClaimLease: testLease, ClaimRenew: testRenew, RequestTimeout: 30 * time.Second})
	if err := survivor.PollNow(ctxT(t), nil); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestFleetDyingEngineProcess$")
	cmd.Env = append(os.Environ(), dyingEngineEnv+"="+db+" "+srv.URL)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	kill := func() {
		if !killed {
			killed = true
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}
	t.Cleanup(kill)

	var intent *model.Task
	waitFor(t, 20*time.Second, "the dying engine's tools/call at the server, its intent on record", func() bool {
		if srv.Calls("sleep") == 0 {
			return false
		}
		es, err := survivor.List(ctxT(t), deck.Filter{})
		if err != nil || len(es) != 1 {
			return false
		}
		intent = es[0].Task
		return true
	})
	if intent.Status != model.StatusCalling || intent.Engine == "" || intent.Engine == survivor.claims.Name() {
		t.Fatalf("the dying engine's intent is %s, made by %q: want calling, made by the dying engine\n%s", intent.Status, intent.Engine, out.String())
	}
	kill()
	killedAt := time.Now()
	waitFor(t, testLease+2*time.Second, "the dead engine's intent orphaned", func() bool {
		en, err := survivor.Get(ctxT(t), intent.ID)
		return err == nil && en.Task.Status == model.StatusOrphaned
	})
	t.Logf("orphaned %s after the kill (lease %s)", time.Since(killedAt).Round(10*time.Millisecond), testLease)
	if n := srv.Calls("sleep"); n != 1 {
		t.Fatalf("%d tools/call of sleep: an orphan is never re-sent", n)
	}
}

// TestFleetLiveEnginesSlowCallNotOrphaned: a call in flight on a live
// engine (the server takes 3 s to answer tools/call, longer than the
// lease) is not orphaned by another engine that claims its intent: the
// maker's heartbeats go on while it calls, even without its loop.
func TestFleetLiveEnginesSlowCallNotOrphaned(t *testing.T) {
	srv := startDemo(t, demo.Options{})
	srv.CountInFlight("tools/call", 3*time.Second)
	db := pgtest.DB(t)
	other := open(t, t.TempDir(), srv, Options{Store: db, Claim: true, Config: fleetCfg(t, srv, 0), ClaimLease: testLease, ClaimRenew: testRenew})
	if err := other.PollNow(ctxT(t), nil); err != nil {
		t.Fatal(err)
	}
	// The maker runs no loop (a one-off `call`).
	maker := open(t, t.TempDir(), srv, Options{Store: db, Claim: true, Config: fleetCfg(t, srv, 1), ClaimLease: testLease, ClaimRenew: testRenew})
	done := make(chan deck.CallResult, 1)
	go func() {
		res, err := maker.Call(ctxT(t), deck.CallRequest{Server: demoRef, Tool: "sleep", Args: json.RawMessage(`{"seconds":0.5}`)})
		if err != nil {
			t.Errorf("the slow call: %v", err)
		}
		done <- res
	}()
	waitFor(t, 10*time.Second, "the other engine to claim the slow call's intent", func() bool {
		es, err := other.List(ctxT(t), deck.Filter{})
		return err == nil && len(es) == 1 && es[0].Task.Status == model.StatusCalling && es[0].Poll.Watcher == other.claims.Name()
	})
	res := <-done
	if res.Task == nil || res.Task.TaskID == "" {
		t.Fatalf("the slow call came back without its handle: %+v", res.Task)
	}
	waitFor(t, 10*time.Second, "the slow call's task completed", func() bool {
		en, err := other.Get(ctxT(t), res.Task.ID)
		return err == nil && en.Task.Status == model.StatusCompleted
	})
	en, _ := other.Get(ctxT(t), res.Task.ID)
	for _, tr := range en.Task.History {
		if tr.To == model.StatusOrphaned {
			t.Fatalf("the live engine's slow call was orphaned: %+v", en.Task.History)
		}
	}
}

// TestFleetContinuedCallAgesFromItsLastCall: a call that waited for input
// and is continued (on another, live engine) is calling again as young as
// its new tools/call, however old its record: another engine that claims
// it while the server takes 3 s to answer leaves it to finish.
func TestFleetContinuedCallAgesFromItsLastCall(t *testing.T) {
	srv := startDemo(t, demo.Options{})
	db := pgtest.DB(t)
	first := open(t, t.TempDir(), srv, Options{Store: db, Claim: true, Config: fleetCfg(t, srv, 1), ClaimLease: testLease, ClaimRenew: testRenew})
	res, err := first.Call(ctxT(t), deck.CallRequest{Server: demoRef, Tool: "confirm_first"})
	if err != nil || !res.NeedsInput {
		t.Fatalf("Call = %+v, %v: want a call that needs input", res, err)
	}
	id := res.Task.ID
	// The record was made two hours ago, by an engine gone since.
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	st, err := postgres.Open(ctxT(t), db, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Update(id, func(r *model.Task) (bool, error) {
		r.CreatedAt = r.CreatedAt.Add(-2 * time.Hour)
		for i := range r.History {
			r.History[i].At = r.History[i].At.Add(-2 * time.Hour)
		}
		return true, nil
	}); err != nil {
		t.Fatal(err)
	}
	// A call is 2 × 2 s + the lease old at most: 6 s, beyond the 3 s stall.
	other := open(t, t.TempDir(), srv, Options{Store: db, Claim: true, Config: fleetCfg(t, srv, 0), ClaimLease: testLease, ClaimRenew: testRenew, RequestTimeout: 2 * time.Second})
	if err := other.PollNow(ctxT(t), nil); err != nil {
		t.Fatal(err)
	}
	srv.CountInFlight("tools/call", 3*time.Second)
	maker := open(t, t.TempDir(), srv, Options{Store: db, Claim: true, Config: fleetCfg(t, srv, 2), ClaimLease: testLease, ClaimRenew: testRenew})
	done := make(chan error, 1)
	go func() {
		_, err := maker.Continue(ctxT(t), id, confirmYes)
		done <- err
	}()
	waitFor(t, 10*time.Second, "the other engine to claim the continued call", func() bool {
		en, err := other.Get(ctxT(t), id)
		return err == nil && en.Task.Status == model.StatusCalling && en.Poll.Watcher == other.claims.Name()
	})
	if err := <-done; err != nil {
		t.Fatalf("the continued call: %v", err)
	}
	en, err := other.Get(ctxT(t), id)
	if err != nil {
		t.Fatal(err)
	}
	if en.Task.TaskID == "" || slices.ContainsFunc(en.Task.History, func(tr model.Transition) bool { return tr.To == model.StatusOrphaned }) {
		t.Fatalf("the continued call of a live engine: %s, task %q, history %+v: want its handle, never orphaned", en.Task.Status, en.Task.TaskID, en.Task.History)
	}
}
