package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	mcpconfig "github.com/taskdeck/taskdeck/mcpclient/config"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store"
	"github.com/taskdeck/taskdeck/store/badger"
)

// The claims of an engine on a shared database: a lease of ClaimLease,
// renewed every ClaimRenew (three tries inside it). The others' rounds
// also wake when the first of their leases runs out, so a dead engine's
// tasks are claimed by another within the lease (≤ 7 s) of its last
// renewal, not the lease plus a round: with the first polls, ≤ 10 s.
const (
	DefaultClaimLease = 7 * time.Second
	DefaultClaimRenew = 2 * time.Second
	// expiryMargin: a round woken by a lease's end runs this much after
	// it, so that the database sees the lease over.
	expiryMargin = 50 * time.Millisecond
	// claimBatch bounds one ClaimTasks or RenewClaims: one write each.
	claimBatch = 500
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
func openBackend(opts Options) (store.Backend, *claimer, []byte, error) {
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
	name := engineName()
	conn, err := url.Parse(opts.Store)
	if err != nil {
		return nil, nil, nil, deck.Errorf(deck.KindUsage, "store %s is not a valid connection URL; fix --store or \"store\" in the config", RedactStore(opts.Store))
	}
	// The members of a fleet count each other by their connections' name:
	// a watcher's are named apart, so that it takes no member's share.
	prefix := enginePrefix
	if !opts.Claim {
		prefix = watcherPrefix
	}
	q := conn.Query()
	q.Set("application_name", prefix+name)
	conn.RawQuery = q.Encode()
	ctx, cancel := context.WithTimeout(context.Background(), opts.RequestTimeout)
	defer cancel()
	key, err := store.LoadAuditKey("")
	if err != nil {
		return nil, nil, nil, deck.Errorf(deck.KindUsage, "%v", err)
	}
	pg, err := store.OpenShared(ctx, conn.String(), opts.Logger.With("component", "store", "store", RedactStore(opts.Store)))
	if err != nil {
		return nil, nil, nil, err
	}
	pg.SetAuditKey(key)
	return pg, newClaimer(pg, name, opts), key, nil
}

// enginePrefix begins the application name of an engine's connections.
const enginePrefix = "taskdeck-engine:" // no space: an encoded query gives it as +

// watcherPrefix begins the application name of a watcher's connections
// (an engine opened without Options.Claim).
const watcherPrefix = "taskdeck-watcher:"

// engineName names this engine in the database: host, pid and a random
// part, as a pid may come again.
func engineName() string {
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// claimer holds an engine's claims on tasks of a shared database.
type claimer struct {
	pg    store.Shared
	name  string // this engine, as the database names the claims' owner
	lease time.Duration
	renew time.Duration
	wake  chan struct{} // a claim round at once (a call made a task)
	// member: this engine claims its share (Options.Claim); a watcher
	// claims only the tasks of servers no live member reaches.
	member bool

	mu sync.Mutex
	// servers are the only tasks it claims: the configured names, and the
	// URLs of ad-hoc calls this process made (a URL may mean another
	// machine on another host: only the engine that called it claims it).
	servers []string
	held    map[string]store.Claim
	// until is when each lease runs out by this engine's clock (from
	// before the request that took or renewed it): a claim not renewed by
	// then is not polled, before another engine may take it.
	until   map[string]time.Time
	waiting map[string]bool // held, with nothing to poll yet
	// tookOver holds the claims taken from an engine whose lease ran out,
	// until they are scheduled: those tasks have gone unwatched for a
	// lease at least, so they are due before a backlog of others.
	tookOver map[string]bool
	// heard is, per held task, the last operator's act (a cancel, answers)
	// heard of in the database's feed: each new one is polled at once.
	heard map[string]acted
	// fleet is the last view of the others' claims and reach, and when it
	// was read (zero: never).
	fleet   store.Fleet
	readAt  time.Time
	triedAt time.Time // the last read, failed or not
	rounds  bool      // the claim rounds run and keep fleet current

	// beating: this engine's heartbeats run (from before its first
	// intent until it closes); aliveMu orders the first one.
	aliveMu sync.Mutex
	beating bool

	// For a scrape (Engine.Stats): leases taken over, fenced writes
	// refused, and the last heartbeat recorded (unix ns).
	tookOverN, fencedN, beatAt atomic.Int64
}

func newClaimer(pg store.Shared, name string, opts Options) *claimer {
	c := &claimer{
		pg:       pg,
		name:     name,
		lease:    opts.ClaimLease,
		renew:    opts.ClaimRenew,
		member:   opts.Claim,
		wake:     make(chan struct{}, 1),
		held:     map[string]store.Claim{},
		until:    map[string]time.Time{},
		waiting:  map[string]bool{},
		tookOver: map[string]bool{},
		heard:    map[string]acted{},
	}
	if c.lease == 0 {
		c.lease = DefaultClaimLease
	}
	if c.renew == 0 {
		c.renew = min(DefaultClaimRenew, c.lease/3)
	}
	if opts.Config != nil {
		c.servers = opts.Config.Names()
	}
	return c
}

// holds tells whether this engine holds a claim on task id.
func (c *claimer) holds(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.held[id]
	return ok
}

// release forgets the claim on id (its task ended, was forgotten, or the
// claim was lost); the lease runs out by itself.
func (c *claimer) release(id string) {
	c.mu.Lock()
	c.forget(id)
	c.mu.Unlock()
}

// forget drops all this engine knows of its claim on id; c.mu is held.
func (c *claimer) forget(id string) {
	delete(c.held, id)
	delete(c.until, id)
	delete(c.waiting, id)
	delete(c.heard, id)
	delete(c.tookOver, id)
}

// acted is what an operator did to a task, as its record says: asked to
// cancel it, and how many of its input requests are answered.
type acted struct {
	cancel   bool
	answered int
}

// heardNew tells whether rec is a held task with an operator's act this
// engine has not heard of yet (a later write keeps the same act); answers
// count once delivered.
func (c *claimer) heardNew(rec *model.Task) bool {
	if len(rec.PendingAnswers) > 0 {
		return false // being sent: a poll now would send them again
	}
	a := acted{cancel: rec.CancelRequested, answered: len(rec.AnsweredKeys)}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.held[rec.ID]; !ok || c.heard[rec.ID] == a {
		return false
	}
	c.heard[rec.ID] = a
	return a != acted{}
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
		if t == nil || !t.Pollable() || !e.claims.heardNew(t) {
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
	} else if l.e.claims.holds(id) {
		l.track(id, server, taskID, now)
	}
}

// unwait ends a claim's wait: its task has something to poll.
func (c *claimer) unwait(id string) {
	c.mu.Lock()
	delete(c.waiting, id)
	c.mu.Unlock()
}

// takenOver tells, once, whether the claim on id was taken from an engine
// whose lease ran out.
func (c *claimer) takenOver(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	was := c.tookOver[id]
	delete(c.tookOver, id)
	return was
}

// claim is this engine's claim on id, if it holds one whose lease has not
// run out by its clock: only then may it poll the task.
func (c *claimer) claim(id string) (store.Claim, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cl, ok := c.held[id]
	if !ok || !time.Now().Before(c.until[id]) {
		return store.Claim{}, false
	}
	return cl, true
}

// reach adds an ad-hoc server this process called to those it claims.
func (c *claimer) reach(ref model.ServerRef) {
	if ref.Name != "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !slices.Contains(c.servers, ref.URL) {
		c.servers = append(c.servers, ref.URL)
	}
}

// claimable is a copy of the servers whose tasks this engine claims.
func (c *claimer) claimable() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.servers)
}

// toClaim are the servers whose tasks a claim round takes: a member's
// all; a watcher's only those that no live member reaches in the last
// view of the fleet (none before the first view).
func (c *claimer) toClaim() []string {
	if c.member {
		return c.claimable()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, s := range c.servers {
		if !c.readAt.IsZero() && !c.fleet.Reachable[s] {
			out = append(out, s)
		}
	}
	return out
}

// watch is who watches rec on the shared database, in the last view read:
// the engine holding its claim, or none that can (no live engine has its
// server). It reads nothing: it runs in the commit hook too.
func (c *claimer) watch(rec *model.Task) (watcher string, noEngine bool) {
	if rec.Status.Terminal() || rec.Status == model.StatusOrphaned {
		return "", false // nothing to watch
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.readAt.IsZero() {
		return "", false // not known yet
	}
	return c.fleet.Watchers[rec.ID], !c.fleet.Reachable[rec.Server.String()]
}

// refreshFleet reads the fleet anew where no claim rounds keep the view
// current (a one-shot command) and it is a renewal old: Get, List and a
// feed's replay call it before they name watchers.
func (e *Engine) refreshFleet() {
	c := e.claims
	c.mu.Lock()
	stale := !c.rounds && time.Since(c.triedAt) > c.renew
	c.mu.Unlock()
	if stale {
		_, _, _ = c.read() // on failure the last view stands (the store says why elsewhere)
	}
}

// read reads the fleet anew and returns the ids whose watcher changed
// (all: nil with changed true, when the reachable servers changed). A
// failed read keeps the last view but not its next expiry, which would
// have the rounds run at once, again and again, while the database is
// away.
func (c *claimer) read() (ids []string, changed bool, err error) {
	f, err := c.pg.Fleet(c.name, c.claimable())
	c.mu.Lock()
	defer c.mu.Unlock()
	c.triedAt = time.Now()
	if err != nil {
		c.fleet.NextExpiry = time.Time{}
		return nil, false, err
	}
	first := c.readAt.IsZero()
	old := c.fleet
	c.fleet, c.readAt = f, time.Now()
	if first || !maps.Equal(old.Reachable, f.Reachable) {
		return nil, true, nil
	}
	for id, w := range f.Watchers {
		if old.Watchers[id] != w {
			ids = append(ids, id)
		}
	}
	for id := range old.Watchers {
		if _, ok := f.Watchers[id]; !ok {
			ids = append(ids, id)
		}
	}
	return ids, len(ids) > 0, nil
}

// watchedElsewhere tells whether another live engine holds rec's claim,
// as the database says now (this engine's view may be a round old): this
// one then neither polls it nor writes what its server says.
func (e *Engine) watchedElsewhere(rec *model.Task) bool {
	c := e.claims
	if _, ok := c.claim(rec.ID); ok {
		return false
	}
	w, err := c.pg.Watcher(rec.ID)
	// Unknown (the database failed): the poll goes out, its write fenced.
	return err == nil && w != "" && w != c.name
}

// next is when the next claim round is due after now: one renewal
// interval, or sooner when another engine's lease on a task this one
// could poll runs out (its engine may be dead).
func (c *claimer) next(now time.Time) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	wait := c.renew
	if at := c.fleet.NextExpiry; !at.IsZero() {
		wait = min(wait, max(at.Sub(now)+expiryMargin, expiryMargin))
	}
	return wait
}

// poke asks for a claim round at once.
func (c *claimer) poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// trickle is what an engine that holds its share still claims in a
// periodic round: tasks of servers that only some engines have would
// otherwise wait for ever behind a share counted over all engines.
const trickle = 8

// round renews the claims held (one write per batch), takes every task
// whose claim ran out, and new ones up to this engine's share of the open
// tasks (one write per batch): it returns the lost and the new claims'
// ids. A poked round (a call made a task) claims nothing beyond the
// share: the other engines' rounds will.
func (c *claimer) round(poked bool) (lost []string, claimed []string, err error) {
	c.mu.Lock()
	var held []store.Claim
	for _, cl := range c.held {
		held = append(held, cl)
	}
	c.mu.Unlock()
	kept := map[string]bool{}
	start := time.Now()
	for batch := range chunks(held, claimBatch) {
		ok, err := c.pg.RenewClaims(batch, c.lease)
		if err != nil {
			return nil, nil, err // the leases stand until they run out
		}
		for _, cl := range ok {
			kept[cl.ID] = true
		}
	}
	c.mu.Lock()
	for _, cl := range held {
		if !kept[cl.ID] {
			c.forget(cl.ID)
			lost = append(lost, cl.ID)
		} else if _, ok := c.held[cl.ID]; ok {
			c.until[cl.ID] = start.Add(c.lease)
		}
	}
	c.mu.Unlock()
	servers := c.toClaim()
	if len(servers) == 0 {
		return lost, nil, nil
	}
	if err := c.beat(); err != nil {
		return lost, nil, err
	}
	// First the tasks whose claim ran out, beyond the share: their engine
	// died or stalled and no one watches them; new tasks even the share out.
	taken, err := c.take(&claimed, takeAll, func(n int) ([]store.Claim, error) {
		got, err := c.pg.ClaimExpired(c.name, servers, n, c.lease)
		c.mu.Lock()
		for _, cl := range got {
			c.tookOver[cl.ID] = true
		}
		c.mu.Unlock()
		c.tookOverN.Add(int64(len(got)))
		return got, err
	})
	if err != nil {
		return lost, claimed, err
	}
	want := takeAll // a watcher's servers have no member to share them with
	if c.member {
		engines, open, err := c.pg.Share(enginePrefix, servers)
		if err != nil {
			return lost, claimed, err
		}
		engines = max(engines, 1) // this one, whatever the view says
		want = max((open+engines-1)/engines-len(held)+len(lost)-taken, 0)
		if !poked {
			want = max(want, trickle)
		}
	}
	if want != 0 {
		_, err = c.take(&claimed, want, func(n int) ([]store.Claim, error) {
			return c.pg.ClaimTasks(c.name, servers, n, c.lease)
		})
	}
	return lost, claimed, err
}

// takeAll asks take for every task there is.
const takeAll = -1

// take claims up to want tasks (takeAll: all there are) with claim, in
// batches, adds their ids to claimed and returns how many it took.
func (c *claimer) take(claimed *[]string, want int, claim func(n int) ([]store.Claim, error)) (int, error) {
	taken := 0
	for want != 0 {
		n := claimBatch
		if want > 0 {
			n = min(want, claimBatch)
		}
		start := time.Now()
		got, err := claim(n)
		if err != nil {
			return taken, err
		}
		c.mu.Lock()
		for _, cl := range got {
			c.held[cl.ID] = cl
			c.until[cl.ID] = start.Add(c.lease)
			*claimed = append(*claimed, cl.ID)
		}
		c.mu.Unlock()
		taken += len(got)
		if len(got) < n {
			break
		}
		if want > 0 {
			want -= len(got)
		}
	}
	return taken, nil
}

// crashed tells a call's intent (read at recsAt) whose process died: its
// maker, another engine, is not alive in a view of the fleet read after
// it; or it is older than a call can take (stale), as its maker, alive or
// unnamed, may still be calling until then. Its age is the database's
// (see store.Shared's Ages; unknown: not judged by age), since another
// engine's clock may be minutes off: its record last written while it
// went calling, no later write makes it older.
func (c *claimer) crashed(t *model.Task, ages map[string]time.Duration, stale time.Duration, recsAt time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.Engine != "" && t.Engine != c.name && c.readAt.After(recsAt) && !c.fleet.Alive[t.Engine] {
		return true
	}
	age, aged := ages[t.ID]
	return aged && age > stale
}

// callingAges are the database's ages of the records among recs that are
// calling (nil when none is, or they cannot be read: then none is judged
// by age, and the next round asks again).
func (c *claimer) callingAges(recs []*model.Task, log *slog.Logger) map[string]time.Duration {
	var ids []string
	for _, t := range recs {
		if t.Status == model.StatusCalling {
			ids = append(ids, t.ID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	ages, err := c.pg.Ages(ids)
	if err != nil {
		log.Warn("the ages of intents claimed could not be read; none is orphaned by age this round", "err", err)
	}
	return ages
}

// chunks yields s in slices of at most n.
func chunks[T any](s []T, n int) func(func([]T) bool) {
	return func(yield func([]T) bool) {
		for len(s) > 0 {
			k := min(n, len(s))
			if !yield(s[:k]) {
				return
			}
			s = s[k:]
		}
	}
}

// update is the tracker's write of a server's word on a task on the
// shared database: it carries this engine's fence, so that an engine that
// lost the claim cannot overwrite the one that took it; one holding no
// claim writes only while no engine holds one.
func (c *claimer) update(id string, fn func(t *model.Task) (bool, error)) (*model.Task, error) {
	cl, ok := c.claim(id)
	if !ok {
		cl = store.Claim{ID: id, Owner: c.name} // fence 0
	}
	rec, err := c.pg.UpdateClaimed(cl, fn)
	c.fencedWrite(err)
	return rec, err
}

// fleetOwner is the owner of an engine on a shared database: every server
// word on a task carries its claim, every intent names it, alive by then.
type fleetOwner struct{ e *Engine }

func (o fleetOwner) write(id string, fn func(t *model.Task) (bool, error)) (*model.Task, error) {
	if o.e.opts.Tracer == nil {
		return o.e.claims.update(id, fn)
	}
	return endSpan(o.e.opts.Tracer, o.e.opts.Now, o.e.claims.update, id, fn)
}

func (o fleetOwner) maker() (string, error) { return o.e.maker() }
func (o fleetOwner) name() string           { return o.e.claims.name }
func (fleetOwner) alone() bool              { return false }

// run starts the claim rounds.
func (o fleetOwner) run(l *loop) {
	o.e.ops.Add(1)
	go l.claims(o.e.ctx)
}

// schedules leaves the tasks this engine claims to the claim rounds; a
// task it does not hold yet is asked a round at once, and an ad-hoc URL
// this process called joins the servers it may claim.
func (o fleetOwner) schedules(rec *model.Task) bool {
	c := o.e.claims
	if c.holds(rec.ID) {
		return true
	}
	c.reach(rec.Server)
	c.poke() // whichever engine claims it polls it
	return false
}

func (o fleetOwner) mayPoll(id string) bool {
	_, ok := o.e.claims.claim(id)
	return ok
}

func (o fleetOwner) release(id string)                { o.e.claims.release(id) }
func (o fleetOwner) committed(changes []store.Change) { o.e.actsHeard(changes) }

func (o fleetOwner) watch(rec *model.Task) (string, bool) { return o.e.claims.watch(rec) }
func (o fleetOwner) refresh()                             { o.e.refreshFleet() }
func (o fleetOwner) elsewhere(rec *model.Task) bool       { return o.e.watchedElsewhere(rec) }

// orphanClaimed turns a crash's intent this engine has claimed into
// `orphaned`, written under the claim's fence, then lets the claim go:
// as on one host, the operator sees it and nothing re-sends it. The
// write runs off the loop, as polls do.
func (l *loop) orphanClaimed(id string) {
	c := l.e.claims
	l.polls.Add(1)
	go func() {
		defer l.polls.Done()
		if _, ok := c.claim(id); ok {
			if _, err := l.e.tracker.Orphan(id); err != nil {
				l.e.log.Warn("a crash's intent could not be marked orphaned", "record", id, "err", err)
			}
		}
		c.release(id)
	}()
}

// maker names this engine on the intents it makes, once the database
// lists it alive: another engine orphans at once an intent whose maker is
// not, so the first heartbeat is committed before the first intent and
// they go on, claim rounds or not (a call from a process without a loop),
// until the engine closes.
func (e *Engine) maker() (string, error) {
	c := e.claims
	c.aliveMu.Lock()
	defer c.aliveMu.Unlock()
	if !c.beating {
		if err := c.beat(); err != nil {
			return "", err
		}
		c.beating = true
		e.ops.Add(1) // inside a request: Close waits for this too
		go e.keepAlive()
	}
	return c.name, nil
}

// keepAlive renews this engine's heartbeat until it closes, then takes it
// off the live ones.
func (e *Engine) keepAlive() {
	defer e.ops.Done()
	c := e.claims
	defer c.leave(e.log)
	t := time.NewTicker(c.renew)
	defer t.Stop()
	for {
		select {
		case <-e.ctx.Done():
			return
		case <-t.C:
		}
		if err := c.beat(); err != nil {
			e.log.Warn("this engine could not record itself alive; its calls in flight may be orphaned by another", "err", err)
		}
	}
}

// beat records this engine alive for a lease: a member with the servers
// it claims while its claim rounds run, else none (it polls nothing, or
// as a watcher only what no member reaches: naming those would hide that).
func (c *claimer) beat() error {
	c.mu.Lock()
	rounds := c.rounds
	c.mu.Unlock()
	servers := []string{}
	if rounds && c.member {
		servers = c.claimable()
	}
	if err := c.pg.Heartbeat(c.name, servers, c.lease); err != nil {
		return err
	}
	c.beatAt.Store(time.Now().UnixNano())
	return nil
}

// leave takes this engine off the live ones: it is closing.
func (c *claimer) leave(log *slog.Logger) {
	if err := c.pg.Leave(c.name); err != nil {
		log.Warn("this engine could not take itself off the live ones; its entry runs out with its lease", "err", err)
	}
}

// claims runs the claim rounds while the loop lives: each hands the loop
// the tasks lost (dropped from the schedule) and the records of the tasks
// claimed and of those claimed earlier that had nothing to poll yet.
func (l *loop) claims(ctx context.Context) {
	defer l.e.ops.Done()
	c := l.e.claims
	c.mu.Lock()
	c.rounds = true
	c.mu.Unlock()
	defer c.leave(l.e.log)
	t := time.NewTimer(0)
	defer t.Stop()
	poked := false
	for {
		lost, claimed, err := c.round(poked)
		if err != nil {
			l.e.log.Warn("claims could not be renewed or taken", "err", err)
		}
		ids := append(claimed, c.waitingIDs()...)
		var recs []*model.Task
		var readRecsErr error
		recsAt := time.Now()
		var ages map[string]time.Duration
		if len(ids) > 0 {
			recs, readRecsErr = c.pg.Tasks(ids) // one read, of those only: a takeover's first polls wait for it
			ages = c.callingAges(recs, l.e.log)
		}
		// The fleet after the records: an intent read has its maker's
		// first heartbeat in this view, if its maker lives.
		moved, ok, readErr := c.read()
		if ok {
			l.e.watchersMoved(moved)
		}
		// The read always asks the database: with the round it tells the
		// store's health, lost or back, even when no write came to say so.
		l.e.health.note(errors.Join(err, readErr))
		if readRecsErr != nil {
			// Kept, unscheduled: the next round reads them again.
			l.e.log.Warn("claimed tasks could not be read", "err", readRecsErr)
			c.wait(claimed)
			ids = nil
		}
		if len(lost) > 0 || len(ids) > 0 {
			l.send(func() { l.claimed(lost, ids, recs, ages, recsAt) })
		}
		t.Reset(c.next(time.Now()))
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			poked = false
		case <-c.wake:
			poked = true
		}
	}
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
		recs, err = e.claims.pg.Tasks(ids)
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

// waitingIDs are the claims held whose tasks had nothing to poll yet (a
// call in flight, or one that needs input).
func (c *claimer) waitingIDs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Collect(maps.Keys(c.waiting))
}

// wait marks claims held as waiting for something to poll.
func (c *claimer) wait(ids []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range ids {
		if _, ok := c.held[id]; ok {
			c.waiting[id] = true
		}
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
	stale := 2*l.e.opts.RequestTimeout + c.lease
	for _, id := range ids {
		t, ok := byID[id]
		switch {
		case !ok || t.Status.Terminal() || t.Status == model.StatusOrphaned:
			c.release(id)
		case t.Status == model.StatusCalling && c.crashed(t, ages, stale, recsAt):
			l.orphanClaimed(id)
		case !t.Pollable():
			c.wait([]string{id})
		default:
			c.unwait(id)
			if _, _, scheduled := l.sched.Due(id); scheduled || !c.holds(id) {
				continue
			}
			at := now
			switch first := t.CreatedAt.Add(l.e.firstPoll(t)); {
			case c.takenOver(id):
				// Due since its dead watcher's lease ran out: ahead of
				// this engine's own overdue polls on a busy machine.
				at = now.Add(-c.lease)
			case first.After(now):
				at = first // a fresh call's first poll is at the server's interval
			}
			l.track(t.ID, t.Server, t.TaskID, at)
		}
	}
}
