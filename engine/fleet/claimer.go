package fleet

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/url"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	mcpconfig "github.com/taskdeck/taskdeck/mcpclient/config"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store"
)

// The claims of an engine on a shared database: a lease of DefaultLease,
// renewed every DefaultRenew (three tries inside it). The others' rounds
// also wake when the first of their leases runs out, so a dead engine's
// tasks are claimed by another within the lease (≤ 7 s) of its last
// renewal, not the lease plus a round: with the first polls, ≤ 10 s.
const (
	DefaultLease = 7 * time.Second
	DefaultRenew = 2 * time.Second
	// expiryMargin: a round woken by a lease's end runs this much after
	// it, so that the database sees the lease over.
	expiryMargin = 50 * time.Millisecond
	// claimBatch bounds one ClaimTasks or RenewClaims: one write each.
	claimBatch = 500
)

// Options configure a Claimer. Zero values select the defaults.
type Options struct {
	Lease time.Duration // a claim's lease; DefaultLease when 0
	Renew time.Duration // how often claims are renewed and taken; DefaultRenew (at most a third of the lease) when 0
	// Member: this engine claims its share of the open tasks (`serve`);
	// else it watches, and claims only the tasks of servers no live
	// member reaches.
	Member bool
	// Servers are the configured servers' names, whose tasks it claims.
	Servers []string
	Logger  *slog.Logger // nil: discard
}

// Named gives this engine its name on the database (host, pid and a
// random part, as a pid may come again) and the connection string conn
// with that name as its application_name, which tells the fleet's
// members (member) from watchers.
func Named(conn string, member bool) (name, named string, err error) {
	u, err := url.Parse(conn)
	if err != nil {
		return "", "", deck.Errorf(deck.KindUsage, "store %s is not a valid connection URL; fix --store or \"store\" in the config", mcpconfig.RedactURL(conn))
	}
	name = engineName()
	// The members of a fleet count each other by their connections' name:
	// a watcher's are named apart, so that it takes no member's share.
	prefix := enginePrefix
	if !member {
		prefix = watcherPrefix
	}
	q := u.Query()
	q.Set("application_name", prefix+name)
	u.RawQuery = q.Encode()
	return name, u.String(), nil
}

// enginePrefix begins the application name of an engine's connections.
const enginePrefix = "taskdeck-engine:" // no space: an encoded query gives it as +

// watcherPrefix begins the application name of a watcher's connections
// (an engine opened without Options.Member).
const watcherPrefix = "taskdeck-watcher:"

// engineName names this engine in the database: host, pid and a random
// part, as a pid may come again.
func engineName() string {
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// Claimer holds an engine's claims on tasks of a shared database.
type Claimer struct {
	pg    store.Shared
	name  string // this engine, as the database names the claims' owner
	lease time.Duration
	renew time.Duration
	log   *slog.Logger
	wake  chan struct{} // a claim round at once (a call made a task)
	// member: this engine claims its share (Options.Member); a watcher
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

	// For a scrape (View): leases taken over, fenced writes refused, and
	// the last heartbeat recorded (unix ns).
	tookOverN, fencedN, beatAt atomic.Int64
}

// New is the claimer of the engine named name (see Named) on pg.
func New(pg store.Shared, name string, opts Options) *Claimer {
	c := &Claimer{
		pg:       pg,
		name:     name,
		lease:    opts.Lease,
		renew:    opts.Renew,
		member:   opts.Member,
		servers:  slices.Clone(opts.Servers),
		log:      opts.Logger,
		wake:     make(chan struct{}, 1),
		held:     map[string]store.Claim{},
		until:    map[string]time.Time{},
		waiting:  map[string]bool{},
		tookOver: map[string]bool{},
		heard:    map[string]acted{},
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.lease == 0 {
		c.lease = DefaultLease
	}
	if c.renew == 0 {
		c.renew = min(DefaultRenew, c.lease/3)
	}
	return c
}

// Name is this engine's, as the database names the claims' owner and
// the intents' maker.
func (c *Claimer) Name() string { return c.name }

// Lease is how long a claim lasts unrenewed.
func (c *Claimer) Lease() time.Duration { return c.lease }

// Shared is the database the claims are on.
func (c *Claimer) Shared() store.Shared { return c.pg }

// View is what a claimer knows now, for a scrape and for tests.
type View struct {
	Held    []string        // the tasks it holds a claim on
	Waiting map[string]bool // held, with nothing to poll yet
	// ReadAt is when the fleet was last read (zero: never), TriedAt when
	// a read was last tried, failed or not.
	ReadAt, TriedAt time.Time
	// NextExpiry is the first end of another engine's lease in that read.
	NextExpiry time.Time
	TakenOver  int64     // leases taken over from an engine that stopped renewing them
	Fenced     int64     // writes the database refused: the claim had moved to another engine
	Beat       time.Time // the last heartbeat recorded (zero: none yet)
}

// View reads what c knows now.
func (c *Claimer) View() View {
	c.mu.Lock()
	v := View{
		Held: slices.Collect(maps.Keys(c.held)), Waiting: maps.Clone(c.waiting),
		ReadAt: c.readAt, TriedAt: c.triedAt, NextExpiry: c.fleet.NextExpiry,
	}
	c.mu.Unlock()
	v.TakenOver, v.Fenced = c.tookOverN.Load(), c.fencedN.Load()
	if at := c.beatAt.Load(); at != 0 {
		v.Beat = time.Unix(0, at)
	}
	return v
}

// Holds tells whether this engine holds a claim on task id.
func (c *Claimer) Holds(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.held[id]
	return ok
}

// Release forgets the claim on id (its task ended, was forgotten, or the
// claim was lost); the lease runs out by itself.
func (c *Claimer) Release(id string) {
	c.mu.Lock()
	c.forget(id)
	c.mu.Unlock()
}

// forget drops all this engine knows of its claim on id; c.mu is held.
func (c *Claimer) forget(id string) {
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

// HeardNew tells whether rec is a held task with an operator's act this
// engine has not heard of yet (a later write keeps the same act); answers
// count once delivered.
func (c *Claimer) HeardNew(rec *model.Task) bool {
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

// Unwait ends a claim's wait: its task has something to poll.
func (c *Claimer) Unwait(id string) {
	c.mu.Lock()
	delete(c.waiting, id)
	c.mu.Unlock()
}

// TakenOver tells, once, whether the claim on id was taken from an engine
// whose lease ran out.
func (c *Claimer) TakenOver(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	was := c.tookOver[id]
	delete(c.tookOver, id)
	return was
}

// claim is this engine's claim on id, if it holds one whose lease has not
// run out by its clock: only then may it poll the task.
func (c *Claimer) claim(id string) (store.Claim, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cl, ok := c.held[id]
	if !ok || !time.Now().Before(c.until[id]) {
		return store.Claim{}, false
	}
	return cl, true
}

// MayPoll tells whether this engine holds a claim on id whose lease has
// not run out by its clock: only then may it poll the task.
func (c *Claimer) MayPoll(id string) bool {
	_, ok := c.claim(id)
	return ok
}

// reach adds an ad-hoc server this process called to those it claims.
func (c *Claimer) reach(ref model.ServerRef) {
	if ref.Name != "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !slices.Contains(c.servers, ref.URL) {
		c.servers = append(c.servers, ref.URL)
	}
}

// Claimable is a copy of the servers whose tasks this engine claims.
func (c *Claimer) Claimable() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.servers)
}

// toClaim are the servers whose tasks a claim round takes: a member's
// all; a watcher's only those that no live member reaches in the last
// view of the fleet (none before the first view).
func (c *Claimer) toClaim() []string {
	if c.member {
		return c.Claimable()
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

// Watch is who watches rec on the shared database, in the last view read:
// the engine holding its claim, or none that can (no live engine has its
// server). It reads nothing: it runs in the commit hook too.
func (c *Claimer) Watch(rec *model.Task) (watcher string, noEngine bool) {
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

// Refresh reads the fleet anew where no claim rounds keep the view
// current (a one-shot command) and it is a renewal old: Get, List and a
// feed's replay call it before they name watchers.
func (c *Claimer) Refresh() {
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
func (c *Claimer) read() (ids []string, changed bool, err error) {
	f, err := c.pg.Fleet(c.name, c.Claimable())
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

// Elsewhere tells whether another live engine holds rec's claim, as the
// database says now (this engine's view may be a round old): this one
// then neither polls it nor writes what its server says.
func (c *Claimer) Elsewhere(rec *model.Task) bool {
	if _, ok := c.claim(rec.ID); ok {
		return false
	}
	w, err := c.pg.Watcher(rec.ID)
	// Unknown (the database failed): the poll goes out, its write fenced.
	return err == nil && w != "" && w != c.name
}

// Schedules tells whether rec's polls are this engine's to schedule as a
// call or an answer leaves it: only if it holds rec's claim. Else a
// claim round runs at once (whichever engine claims it polls it), and an
// ad-hoc URL this process called joins the servers it may claim.
func (c *Claimer) Schedules(rec *model.Task) bool {
	if c.Holds(rec.ID) {
		return true
	}
	c.reach(rec.Server)
	c.poke()
	return false
}

// Crashed tells a call's intent (read at recsAt) whose process died: its
// maker, another engine, is not alive in a view of the fleet read after
// it; or it is older than a call can take (stale), as its maker, alive or
// unnamed, may still be calling until then. Its age is the database's
// (see store.Shared's Ages; unknown: not judged by age), since another
// engine's clock may be minutes off: its record last written while it
// went calling, no later write makes it older.
func (c *Claimer) Crashed(t *model.Task, ages map[string]time.Duration, stale time.Duration, recsAt time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.Engine != "" && t.Engine != c.name && c.readAt.After(recsAt) && !c.fleet.Alive[t.Engine] {
		return true
	}
	age, aged := ages[t.ID]
	return aged && age > stale
}

// Update is the write of a server's word on task id on the shared
// database: it carries this engine's fence, so that an engine that lost
// the claim cannot overwrite the one that took it (store.ErrFenced); one
// holding no claim writes only while no engine holds one.
func (c *Claimer) Update(id string, fn func(t *model.Task) (bool, error)) (*model.Task, error) {
	cl, ok := c.claim(id)
	if !ok {
		cl = store.Claim{ID: id, Owner: c.name} // fence 0
	}
	rec, err := c.pg.UpdateClaimed(cl, fn)
	if errors.Is(err, store.ErrFenced) {
		c.fencedN.Add(1)
	}
	return rec, err
}

// FirstAlive is the name that sorts first among the engines alive on the
// database as last read; false before the first read.
func (c *Claimer) FirstAlive() (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.readAt.IsZero() || len(c.fleet.Alive) == 0 {
		return "", false
	}
	names := make([]string, 0, len(c.fleet.Alive))
	for n, alive := range c.fleet.Alive {
		if alive {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return "", false
	}
	return slices.Min(names), true
}

// Wait marks claims held as waiting for something to poll.
func (c *Claimer) Wait(ids []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range ids {
		if _, ok := c.held[id]; ok {
			c.waiting[id] = true
		}
	}
}

// waitingIDs are the claims held whose tasks had nothing to poll yet (a
// call in flight, or one that needs input).
func (c *Claimer) waitingIDs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Collect(maps.Keys(c.waiting))
}
