package engine

import (
	"context"
	"strings"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/engine/fleet"
	mcpconfig "github.com/taskdeck/taskdeck/mcpclient/config"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store"
	"github.com/taskdeck/taskdeck/store/badger"
)

// A claim's lease and how often claims are renewed on a shared database
// (package fleet).
const (
	DefaultClaimLease = fleet.DefaultLease
	DefaultClaimRenew = fleet.DefaultRenew
)

// IsPostgres tells whether a --store value names a PostgreSQL database.
func IsPostgres(conn string) bool {
	return strings.HasPrefix(conn, "postgres://") || strings.HasPrefix(conn, "postgresql://")
}

// RedactStore words a --store value for messages and logs: its password,
// user and query (which may carry one) never show.
func RedactStore(conn string) string { return mcpconfig.RedactURL(conn) }

// openBackend opens the store opts name: Badger in DataDir, or the
// PostgreSQL database of a connection string (then also its claims);
// its audit entries sealed with the audit key (store.LoadAuditKey),
// which it returns.
func openBackend(opts Options) (store.Backend, *fleet.Claimer, []byte, error) {
	switch {
	case opts.Store == "":
		st, err := badger.Open(opts.DataDir, opts.Logger)
		if err != nil {
			return nil, nil, nil, err
		}
		// Loaded once the store's lock is held: one process makes the key.
		key, err := store.LoadAuditKey(opts.DataDir)
		if err != nil {
			_ = st.Close()
			return nil, nil, nil, deck.Errorf(deck.KindUsage, "%v", err)
		}
		st.SetAuditKey(key)
		return st, nil, key, nil
	case !IsPostgres(opts.Store):
		return nil, nil, nil, deck.Errorf(deck.KindUsage, "store %q is neither empty (Badger in the data directory) nor a postgres:// connection string; fix --store or \"store\" in the config", RedactStore(opts.Store))
	}
	name, conn, err := fleet.Named(opts.Store, opts.Claim)
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), opts.RequestTimeout)
	defer cancel()
	key, err := store.LoadAuditKey("")
	if err != nil {
		return nil, nil, nil, deck.Errorf(deck.KindUsage, "%v", err)
	}
	pg, err := store.OpenShared(ctx, conn, opts.Logger.With("component", "store", "store", RedactStore(opts.Store)))
	if err != nil {
		return nil, nil, nil, err
	}
	pg.SetAuditKey(key)
	fo := fleet.Options{Lease: opts.ClaimLease, Renew: opts.ClaimRenew, Member: opts.Claim, Logger: opts.Logger.With("engine", name)}
	if opts.Config != nil {
		fo.Servers = opts.Config.Names()
	}
	return pg, fleet.New(pg, name, fo), key, nil
}

// actsHeard polls at once the tasks this engine watches that an operator
// cancelled or answered on another engine (which leaves the poll to the
// watcher), so that the outcome shows as soon as that engine's own poll
// would have shown it. It runs on the store's listener: it never waits
// for the loop.
func (e *Engine) actsHeard(changes []change) {
	l := e.running()
	if l == nil {
		return
	}
	for _, ch := range changes {
		t := ch.Task
		if t == nil || !t.Pollable() || !e.claims.HeardNew(t) {
			continue
		}
		id, server, taskID := t.ID, t.Server, t.TaskID
		select {
		case l.inbox <- func() { l.pollHeld(id, server, taskID) }:
		default: // the loop is busy: the task's next poll comes all the same
		}
	}
}

// pollHeld polls a task this engine holds at once: one scheduled now, or
// one just claimed that the claim round has not scheduled yet.
func (l *loop) pollHeld(id string, server model.ServerRef, taskID string) {
	now := time.Now()
	if _, _, scheduled := l.sched.Due(id); scheduled {
		l.pollSoon(server, id, now)
	} else if l.e.claims.Holds(id) {
		l.track(id, server, taskID, now)
	}
}

// fleetOwner is the owner of an engine on a shared database (package
// fleet): every server word on a task carries its claim, every intent
// names it, alive by then.
type fleetOwner struct{ e *Engine }

func (o fleetOwner) write(id string, fn func(t *model.Task) (bool, error)) (*model.Task, error) {
	if o.e.opts.Tracer == nil {
		return o.e.claims.Update(id, fn)
	}
	return endSpan(o.e.opts.Tracer, o.e.opts.Now, o.e.claims.Update, id, fn)
}

func (o fleetOwner) maker() (string, error) { return o.e.claims.Maker(o.e.ctx, &o.e.ops) }
func (o fleetOwner) name() string           { return o.e.claims.Name() }
func (fleetOwner) alone() bool              { return false }

// run starts the claim rounds, which hand the loop what they claimed.
func (o fleetOwner) run(l *loop) {
	o.e.ops.Add(1)
	go func() {
		defer o.e.ops.Done()
		o.e.claims.Run(o.e.ctx, rounds{l}, o.e.health)
	}()
}

// schedules leaves the tasks this engine claims to the claim rounds.
func (o fleetOwner) schedules(rec *model.Task) bool   { return o.e.claims.Schedules(rec) }
func (o fleetOwner) mayPoll(id string) bool           { return o.e.claims.MayPoll(id) }
func (o fleetOwner) release(id string)                { o.e.claims.Release(id) }
func (o fleetOwner) committed(changes []store.Change) { o.e.actsHeard(changes) }

func (o fleetOwner) watch(rec *model.Task) (string, bool) { return o.e.claims.Watch(rec) }
func (o fleetOwner) refresh()                             { o.e.claims.Refresh() }
func (o fleetOwner) elsewhere(rec *model.Task) bool       { return o.e.claims.Elsewhere(rec) }

// rounds is the loop as the claim rounds see it.
type rounds struct{ l *loop }

func (r rounds) Claimed(c fleet.Round) {
	r.l.send(func() { r.l.claimed(c.Lost, c.IDs, c.Recs, c.Ages, c.RecsAt) })
}

func (r rounds) WatchersMoved(ids []string) { r.l.e.watchersMoved(ids) }

// orphanClaimed turns a crash's intent this engine has claimed into
// `orphaned`, written under the claim's fence, then lets the claim go:
// as on one host, the operator sees it and nothing re-sends it. The
// write runs off the loop, as polls do.
func (l *loop) orphanClaimed(id string) {
	c := l.e.claims
	l.polls.Add(1)
	go func() {
		defer l.polls.Done()
		if c.MayPoll(id) {
			if _, err := l.e.tracker.Orphan(id); err != nil {
				l.e.log.Warn("a crash's intent could not be marked orphaned", "record", id, "err", err)
			}
		}
		c.Release(id)
	}()
}

// watchersMoved tells the feed of the open tasks whose watcher changed
// (ids nil: all, as the engines' reach changed), so that every dashboard
// on the database shows who watches each. One read, one event.
func (e *Engine) watchersMoved(ids []string) {
	var recs []*model.Task
	var err error
	if ids == nil {
		recs, err = e.store.OpenTasks()
	} else {
		recs, err = e.claims.Shared().Tasks(ids)
	}
	if err != nil {
		e.log.Warn("tasks whose watcher changed could not be read", "err", err)
		return
	}
	var entries []deck.Entry // one event: a takeover moves hundreds
	for _, rec := range recs {
		entries = append(entries, e.entry(rec))
	}
	if len(entries) > 0 {
		e.feeds.poll(entries...)
	}
}

// claimed files a claim round on the loop: lost tasks leave the schedule;
// claimed ones (ids, with their records in recs) join it when their first
// poll is due, wait while they have nothing to poll, and are released
// once ended or forgotten. A call's intent whose process died (see
// crashed; the records read at recsAt, the intents' ages) is marked
// orphaned, then released.
func (l *loop) claimed(lost, ids []string, recs []*model.Task, ages map[string]time.Duration, recsAt time.Time) {
	c := l.e.claims
	for _, id := range lost {
		l.drop(id)
	}
	byID := make(map[string]*model.Task, len(recs))
	for _, t := range recs {
		byID[t.ID] = t
	}
	now := time.Now()
	stale := 2*l.e.opts.RequestTimeout + c.Lease()
	for _, id := range ids {
		t, ok := byID[id]
		switch {
		case !ok || t.Status.Terminal() || t.Status == model.StatusOrphaned:
			c.Release(id)
		case t.Status == model.StatusCalling && c.Crashed(t, ages, stale, recsAt):
			l.orphanClaimed(id)
		case !t.Pollable():
			c.Wait([]string{id})
		default:
			c.Unwait(id)
			if _, _, scheduled := l.sched.Due(id); scheduled || !c.Holds(id) {
				continue
			}
			at := now
			switch first := t.CreatedAt.Add(l.e.firstPoll(t)); {
			case c.TakenOver(id):
				// Due since its dead watcher's lease ran out: ahead of
				// this engine's own overdue polls on a busy machine.
				at = now.Add(-c.Lease())
			case first.After(now):
				at = first // a fresh call's first poll is at the server's interval
			}
			l.track(t.ID, t.Server, t.TaskID, at)
		}
	}
}
