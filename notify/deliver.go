package notify

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v5"

	mcpconfig "github.com/taskdeck/taskdeck/mcpclient/config"
	"github.com/taskdeck/taskdeck/store"
)

// Delivery bounds. An event is retried with backoff and jitter until
// RetryWindow after its commit, then dropped and counted as expired: the
// outbox holds at most the events of one window.
const (
	DefaultRetryWindow = 24 * time.Hour
	DefaultFirstRetry  = time.Second
	DefaultMaxRetry    = 5 * time.Minute
	// perEndpoint bounds the deliveries in flight to one endpoint (for a
	// command hook: the hooks running at once).
	perEndpoint = 4
	// batch bounds the entries read from the outbox at a time.
	batch = 256
	// idlePoll is how often the outbox is read with no commit heard: a
	// retry falls due, or (on a fleet) another engine's claim lapsed.
	idlePoll = time.Second
)

// Options configure a Deliverer. Zero values select the defaults.
type Options struct {
	Notify mcpconfig.Notify
	// Lookup reads a ${VAR} secret (os.LookupEnv in production).
	Lookup      func(string) (string, bool)
	Logger      *slog.Logger
	RetryWindow time.Duration
	FirstRetry  time.Duration // the first retry's delay, doubled on each
	MaxRetry    time.Duration // the longest delay between two attempts
	HTTPTimeout time.Duration // one POST, DefaultHTTPTimeout when 0
	// Failed, when set, hears each failed attempt, by endpoint (metrics).
	Failed func(endpoint string)
}

// sender delivers one event to one endpoint.
type sender interface {
	send(ctx context.Context, e store.OutboxEntry) error
	timeout() time.Duration
}

// Deliverer sends the outbox's events to their endpoints until Close.
type Deliverer struct {
	ob      store.Outbox
	opts    Options
	log     *slog.Logger
	senders map[string]sender
	lease   time.Duration
	wakeC   chan struct{}
	ctx     context.Context
	cancel  context.CancelFunc
	stop    chan struct{} // closed by Handover: read the outbox no more
	loop    sync.WaitGroup
	wg      sync.WaitGroup // the attempts in flight
	crew    *crew
}

// crew is what the Deliverers of one outbox share across config reloads
// (Handover): the attempts in flight, so that none is started twice, and
// the slots that bound them per endpoint.
type crew struct {
	mu       sync.Mutex
	inflight map[entryKey]bool
	slots    map[string]chan struct{}
	// retiring are the Deliverers handed over whose attempts still run;
	// Close of any of the crew cuts them off. current is the one that
	// reads the outbox: an attempt that ends wakes it.
	retiring map[*Deliverer]bool
	current  *Deliverer
}

type entryKey struct {
	rev      uint64
	endpoint string
}

// New makes a Deliverer for ob; it reads the secrets, and refuses an
// unset or malformed one with the config's one-line error.
func New(ob store.Outbox, opts Options) (*Deliverer, error) {
	opts.Logger = cmp.Or(opts.Logger, slog.New(slog.DiscardHandler))
	opts.RetryWindow = cmp.Or(opts.RetryWindow, DefaultRetryWindow)
	opts.FirstRetry = cmp.Or(opts.FirstRetry, DefaultFirstRetry)
	opts.MaxRetry = cmp.Or(opts.MaxRetry, DefaultMaxRetry)
	opts.HTTPTimeout = cmp.Or(opts.HTTPTimeout, DefaultHTTPTimeout)
	d := &Deliverer{ob: ob, opts: opts, log: opts.Logger, senders: map[string]sender{}, wakeC: make(chan struct{}, 1),
		stop: make(chan struct{}), crew: &crew{inflight: map[entryKey]bool{}, slots: map[string]chan struct{}{}, retiring: map[*Deliverer]bool{}}}
	d.crew.current = d
	for _, w := range opts.Notify.Webhooks {
		key, err := w.ExpandSecret(opts.Lookup)
		if err != nil {
			return nil, err
		}
		s, err := newWebhook(w, key, opts.HTTPTimeout)
		if err != nil {
			return nil, err
		}
		d.senders[w.Endpoint()] = s
	}
	for _, c := range opts.Notify.Commands {
		d.senders[c.Endpoint()] = newCommand(c)
	}
	for ep, s := range d.senders {
		d.crew.slots[ep] = make(chan struct{}, perEndpoint)
		// A claim outlasts the longest attempt, so that no other engine
		// of a fleet delivers the event while this one still tries.
		d.lease = max(d.lease, 2*s.timeout()+10*time.Second)
	}
	return d, nil
}

// Start begins delivering.
func (d *Deliverer) Start() {
	d.ctx, d.cancel = context.WithCancel(context.Background())
	d.loop.Add(1)
	go d.run()
}

// Handover makes next (new, not started) deliver in d's place, for a
// config reload: d reads the outbox no more, but lets its attempts in
// flight end on their own (each bounded by its endpoint's timeout) and
// records their outcomes, while next skips those entries. So an edit
// never runs a hook twice for one event, nor cuts one off halfway. Close
// of next (or of d) still cuts off what d has left. next must be started
// after.
func (d *Deliverer) Handover(next *Deliverer) {
	if d.cancel != nil {
		close(d.stop)
		d.loop.Wait()
	}
	c := d.crew
	c.mu.Lock()
	for ep, slot := range c.slots {
		if next.senders[ep] == nil && len(slot) == 0 {
			delete(c.slots, ep) // an endpoint gone, nothing of it in flight
		}
	}
	for ep := range next.senders {
		if c.slots[ep] == nil {
			c.slots[ep] = make(chan struct{}, perEndpoint)
		}
	}
	next.crew, c.current = c, next
	if d.cancel == nil {
		c.mu.Unlock()
		return
	}
	c.retiring[d] = true
	c.mu.Unlock()
	go func() {
		d.wg.Wait()
		c.mu.Lock()
		delete(c.retiring, d)
		c.mu.Unlock()
		d.cancel()
	}()
}

// Wake tells the Deliverer that a commit may have added events. It never
// blocks: the engine's commit hook calls it.
func (d *Deliverer) Wake() {
	select {
	case d.wakeC <- struct{}{}:
	default:
	}
}

// Close stops delivering and waits for the attempts in flight, its own
// and those of the Deliverers it took over from, which it cancels; their
// events are delivered again by the next owner.
func (d *Deliverer) Close() {
	d.crew.mu.Lock()
	all := append(slices.Collect(maps.Keys(d.crew.retiring)), d)
	d.crew.mu.Unlock()
	for _, x := range all {
		if x.cancel != nil {
			x.cancel()
			x.loop.Wait()
			x.wg.Wait()
		}
	}
}

func (d *Deliverer) run() {
	defer d.loop.Done()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-d.ctx.Done():
			return
		case <-d.stop:
			return
		case <-d.wakeC:
		case <-timer.C:
		}
		d.round()
		timer.Reset(idlePoll)
	}
}

// round starts a delivery of every due entry that has a free slot; one
// that has none waits for a delivery to end, which wakes the loop.
func (d *Deliverer) round() {
	// Held from the read to the last dispatch: a delivery that ends
	// meanwhile leaves inflight only after, so an entry it removed from
	// the outbox after this read is not sent again.
	d.crew.mu.Lock()
	defer d.crew.mu.Unlock()
	entries, err := d.ob.Outbox(batch, d.lease)
	if err != nil {
		d.log.Warn("notify: reading the outbox", "err", err)
		return
	}
	now := time.Now()
	var unsent []store.OutboxEntry // claimed, with no free slot: any engine's again at once
	defer func() {
		if err := d.ob.OutboxRelease(unsent); err != nil {
			d.log.Warn("notify: giving back outbox events", "err", err)
		}
	}()
	for _, e := range entries {
		k := entryKey{e.Rev, e.Endpoint}
		if d.crew.inflight[k] {
			continue
		}
		s := d.senders[e.Endpoint]
		if now.Sub(e.At) > d.opts.RetryWindow {
			// An endpoint no longer configured ends here too.
			d.done(e, store.Expired, fmt.Sprintf("not delivered within the retry window (%s) after %d attempts", d.opts.RetryWindow, e.Attempts), time.Time{})
			continue
		}
		if s == nil {
			continue // kept for the endpoint's return, until the window ends
		}
		slot := d.crew.slots[e.Endpoint]
		select {
		case slot <- struct{}{}:
		default:
			unsent = append(unsent, e)
			continue
		}
		d.crew.inflight[k] = true
		d.wg.Add(1)
		go d.deliver(s, e, slot)
	}
}

func (d *Deliverer) deliver(s sender, e store.OutboxEntry, slot chan struct{}) {
	defer d.wg.Done()
	body, err := Unpack(e.Body)
	if err != nil {
		// It cannot heal: counted as expired, as one never delivered.
		d.done(e, store.Expired, err.Error(), time.Time{})
		d.release(e, slot)
		return
	}
	e.Body = body
	err = s.send(d.ctx, e)
	if d.ctx.Err() != nil && err != nil {
		// Cut off by Close: not the endpoint's failure, and the next
		// owner may send it at once.
		if err := d.ob.OutboxRelease([]store.OutboxEntry{e}); err != nil {
			d.log.Warn("notify: giving back outbox events", "err", err)
		}
		d.release(e, slot)
		return
	}
	if err == nil {
		d.done(e, store.Delivered, "", time.Time{})
	} else {
		d.log.Info("notify: delivery failed", "endpoint", e.Endpoint, "id", e.ID, "attempt", e.Attempts+1, "err", err)
		if d.opts.Failed != nil {
			d.opts.Failed(e.Endpoint)
		}
		d.done(e, store.Failed, err.Error(), time.Now().Add(d.retryDelay(e.Attempts+1)))
	}
	d.release(e, slot)
	d.crew.mu.Lock()
	cur := d.crew.current
	d.crew.mu.Unlock()
	cur.Wake()
}

func (d *Deliverer) release(e store.OutboxEntry, slot chan struct{}) {
	d.crew.mu.Lock()
	delete(d.crew.inflight, entryKey{e.Rev, e.Endpoint})
	d.crew.mu.Unlock()
	<-slot
}

func (d *Deliverer) done(e store.OutboxEntry, o store.Outcome, errText string, retryAt time.Time) {
	if err := d.ob.OutboxDone(e, o, errText, retryAt); err != nil && !errors.Is(err, context.Canceled) {
		d.log.Warn("notify: recording a delivery", "endpoint", e.Endpoint, "id", e.ID, "err", err)
	}
}

// retryDelay is the wait before the attempt after the nth failed one:
// exponential from FirstRetry to MaxRetry, with ±50% jitter.
func (d *Deliverer) retryDelay(n int) time.Duration {
	b := &backoff.ExponentialBackOff{InitialInterval: d.opts.FirstRetry, RandomizationFactor: 0.5, Multiplier: 2, MaxInterval: d.opts.MaxRetry}
	b.Reset()
	var wait time.Duration
	for range min(n, 64) {
		wait = b.NextBackOff()
	}
	return wait
}
