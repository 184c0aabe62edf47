package fleet

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store"
)

// Next is when the next claim round is due after now: one renewal
// interval, or sooner when another engine's lease on a task this one
// could poll runs out (its engine may be dead).
func (c *Claimer) Next(now time.Time) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	wait := c.renew
	if at := c.fleet.NextExpiry; !at.IsZero() {
		wait = min(wait, max(at.Sub(now)+expiryMargin, expiryMargin))
	}
	return wait
}

// poke asks for a claim round at once.
func (c *Claimer) poke() {
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
func (c *Claimer) round(poked bool) (lost []string, claimed []string, err error) {
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
		return c.pg.ClaimExpired(c.name, servers, n, c.lease)
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
// batches, adds their ids to claimed and returns how many it took. A
// fence above 1 is a takeover, whichever claim made it: an earlier claim
// ran out, and a lease that runs out between a round's ClaimExpired and
// its ClaimTasks is taken by the second.
func (c *Claimer) take(claimed *[]string, want int, claim func(n int) ([]store.Claim, error)) (int, error) {
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
			if cl.Fence > 1 {
				c.tookOver[cl.ID] = true
				c.tookOverN.Add(1)
			}
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

// callingAges are the database's ages of the records among recs that are
// calling (nil when none is, or they cannot be read: then none is judged
// by age, and the next round asks again).
func (c *Claimer) callingAges(recs []*model.Task) map[string]time.Duration {
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
		c.log.Warn("the ages of intents claimed could not be read; none is orphaned by age this round", "err", err)
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

// Maker names this engine on the intents it makes, once the database
// lists it alive: another engine orphans at once an intent whose maker is
// not, so the first heartbeat is committed before the first intent and
// they go on, claim rounds or not (a call from a process without a loop),
// until ctx ends. ops counts the heartbeats' goroutine, so that the
// engine's Close waits for it.
func (c *Claimer) Maker(ctx context.Context, ops *sync.WaitGroup) (string, error) {
	c.aliveMu.Lock()
	defer c.aliveMu.Unlock()
	if !c.beating {
		if err := c.beat(); err != nil {
			return "", err
		}
		c.beating = true
		ops.Add(1) // inside a request: Close waits for this too
		go c.keepAlive(ctx, ops)
	}
	return c.name, nil
}

// keepAlive renews this engine's heartbeat until ctx ends, then takes it
// off the live ones.
func (c *Claimer) keepAlive(ctx context.Context, ops *sync.WaitGroup) {
	defer ops.Done()
	defer c.leave()
	t := time.NewTicker(c.renew)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := c.beat(); err != nil {
			c.log.Warn("this engine could not record itself alive; its calls in flight may be orphaned by another", "err", err)
		}
	}
}

// beat records this engine alive for a lease: a member with the servers
// it claims while its claim rounds run, else none (it polls nothing, or
// as a watcher only what no member reaches: naming those would hide that).
func (c *Claimer) beat() error {
	c.mu.Lock()
	rounds := c.rounds
	c.mu.Unlock()
	servers := []string{}
	if rounds && c.member {
		servers = c.Claimable()
	}
	if err := c.pg.Heartbeat(c.name, servers, c.lease); err != nil {
		return err
	}
	c.beatAt.Store(time.Now().UnixNano())
	return nil
}

// leave takes this engine off the live ones: it is closing.
func (c *Claimer) leave() {
	if err := c.pg.Leave(c.name); err != nil {
		c.log.Warn("this engine could not take itself off the live ones; its entry runs out with its lease", "err", err)
	}
}

// Round is what one claim round hands the engine's loop.
type Round struct {
	Lost []string // claims lost: their tasks leave the schedule
	// IDs are the tasks claimed in the round and those claimed earlier
	// that had nothing to poll yet; Recs their records, read at RecsAt.
	IDs    []string
	Recs   []*model.Task
	RecsAt time.Time
	// Ages are the database's ages of the intents among Recs (see
	// Crashed).
	Ages map[string]time.Duration
}

// Loop is what the claim rounds tell: the engine's run loop.
type Loop interface {
	// Claimed files a round's outcome on the loop.
	Claimed(r Round)
	// WatchersMoved tells that the watchers of the open tasks ids
	// changed (nil: all, as the engines' reach changed).
	WatchersMoved(ids []string)
}

// Run runs the claim rounds until ctx ends: each hands loop the tasks
// lost and the records of the tasks claimed and of those claimed earlier
// that had nothing to poll yet, and tells health whether the database
// answered.
func (c *Claimer) Run(ctx context.Context, loop Loop, health *Health) {
	c.mu.Lock()
	c.rounds = true
	c.mu.Unlock()
	defer c.leave()
	t := time.NewTimer(0)
	defer t.Stop()
	poked := false
	for {
		lost, claimed, err := c.round(poked)
		if err != nil {
			c.log.Warn("claims could not be renewed or taken", "err", err)
		}
		r := Round{Lost: lost, IDs: append(claimed, c.waitingIDs()...), RecsAt: time.Now()}
		var readRecsErr error
		if len(r.IDs) > 0 {
			r.Recs, readRecsErr = c.pg.Tasks(r.IDs) // one read, of those only: a takeover's first polls wait for it
			r.Ages = c.callingAges(r.Recs)
		}
		// The fleet after the records: an intent read has its maker's
		// first heartbeat in this view, if its maker lives.
		moved, ok, readErr := c.read()
		if ok {
			loop.WatchersMoved(moved)
		}
		// The read always asks the database: with the round it tells the
		// store's health, lost or back, even when no write came to say so.
		health.Note(errors.Join(err, readErr))
		if readRecsErr != nil {
			// Kept, unscheduled: the next round reads them again.
			c.log.Warn("claimed tasks could not be read", "err", readRecsErr)
			c.Wait(claimed)
			r.IDs = nil
		}
		if len(r.Lost) > 0 || len(r.IDs) > 0 {
			loop.Claimed(r)
		}
		t.Reset(c.Next(time.Now()))
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
