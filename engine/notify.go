package engine

import (
	"context"
	"maps"
	"os"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/taskdeck/taskdeck/deck"
	mcpconfig "github.com/taskdeck/taskdeck/mcpclient/config"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/notify"
	"github.com/taskdeck/taskdeck/store"
)

// notifier (nil-safe) is the engine's part in issue 27: the store's outbox (nil when
// the backend has none) and the Deliverer that empties it (nil when
// nothing is configured, or this engine only watches a fleet). An edit of
// the config's "notify" replaces both the events and the Deliverer
// (reload), without restarting the owner.
type notifier struct {
	ob      store.Outbox
	deliver bool // this engine delivers: the store's owner, or a claiming fleet engine
	opts    notify.Options
	// events is the EventFunc of the config in use (nil: none), read on
	// every write: the store is given it once, through one that loads it.
	events atomic.Pointer[store.EventFunc]

	// failures counts this engine's failed attempts by endpoint (an
	// endpoint name is a configured one's: bounded).
	failures sync.Map // string → *atomic.Int64

	mu      sync.Mutex
	cfg     mcpconfig.Notify
	d       *notify.Deliverer
	started bool
	closed  bool
}

// openNotify makes st commit the events the config's "notify" endpoints
// want to its outbox, and makes the Deliverer that sends them, started
// once the engine is open: in the store's owner, and on a fleet in each
// claiming engine (the outbox's claims give each event to one).
func openNotify(st store.Backend, opts Options) (*notifier, error) {
	n := &notifier{deliver: opts.Store == "" || opts.Claim,
		opts: notify.Options{Lookup: os.LookupEnv, Logger: opts.Logger.With("component", "notify")}}
	n.opts.Failed = n.failed
	n.ob, _ = st.(store.Outbox)
	if n.ob == nil {
		return n, nil
	}
	// Set even with no endpoint configured, so that an edit can add one;
	// until then a write pays an atomic load.
	n.ob.SetEvents(func(prev, next *model.Task) *store.Event {
		if fn := n.events.Load(); fn != nil {
			return (*fn)(prev, next)
		}
		return nil
	})
	var cfg mcpconfig.Notify
	if opts.Config != nil {
		cfg = opts.Config.Notify
	}
	d, err := n.deliverer(cfg)
	if err != nil {
		return nil, err
	}
	n.use(cfg, d)
	return n, nil
}

// deliverer makes the Deliverer of cfg (nil where this engine delivers
// nothing); it refuses an unset or malformed secret.
func (n *notifier) deliverer(cfg mcpconfig.Notify) (*notify.Deliverer, error) {
	if cfg.Empty() || !n.deliver {
		return nil, nil
	}
	opts := n.opts
	opts.Notify = cfg
	return notify.New(n.ob, opts)
}

// use puts cfg in use: its events for every write from now on, and d
// (nil: none) to deliver them, started if the engine is.
func (n *notifier) use(cfg mcpconfig.Notify, d *notify.Deliverer) {
	if fn := notify.Events(cfg); fn != nil {
		n.events.Store(&fn)
	} else {
		n.events.Store(nil)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		if d != nil {
			d.Close() // never started: cuts off only what it took over
		}
		return
	}
	n.cfg, n.d = cfg, d
	if d != nil && n.started {
		d.Start()
	}
}

// reload puts an edited "notify" in use. The old Deliverer hands over to
// the new one: it lets its attempts in flight end (each bounded by its
// endpoint's timeout) while the new one skips them, so that no hook runs
// twice for one event; the new one reads the outbox at once, so it sends
// what the old one left and what was committed meanwhile for endpoints it
// adds. An edit that removes every endpoint stops the old one, its
// attempts cancelled and their entries kept. An edit it refuses (a
// secret unset) leaves the version in use.
func (n *notifier) reload(cfg mcpconfig.Notify) (changed bool, err error) {
	if n == nil || n.ob == nil {
		return false, nil
	}
	n.mu.Lock()
	same := n.closed || reflect.DeepEqual(n.cfg, cfg)
	n.mu.Unlock()
	if same {
		return false, nil
	}
	d, err := n.deliverer(cfg)
	if err != nil {
		return false, err
	}
	n.mu.Lock()
	old := n.d
	n.d = nil
	n.mu.Unlock()
	switch {
	case old != nil && d != nil:
		old.Handover(d)
	case old != nil:
		old.Close()
	}
	n.use(cfg, d)
	return true, nil
}

func (n *notifier) start() {
	if n == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.started = true
	if n.d != nil {
		n.d.Start()
	}
}

// wake: a commit may have added events. Called by the commit hook.
func (n *notifier) wake() {
	if n == nil {
		return
	}
	n.mu.Lock()
	d := n.d
	n.mu.Unlock()
	if d != nil {
		d.Wake()
	}
}

func (n *notifier) close() {
	if n == nil {
		return
	}
	n.mu.Lock()
	d := n.d
	n.d, n.closed = nil, true
	n.mu.Unlock()
	if d != nil {
		d.Close()
	}
}

// config is the "notify" in use.
func (n *notifier) config() mcpconfig.Notify {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cfg
}

var _ deck.Notifier = (*Engine)(nil)

// NotifyStatus implements deck.Notifier: each configured endpoint, then
// any the outbox still counts that is no longer configured. It reads an
// edited config first, as a request naming servers does; an edit refused
// is logged, and the endpoints in use are the answer.
func (e *Engine) NotifyStatus(ctx context.Context) ([]deck.NotifyEndpoint, error) {
	_, done, err := e.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	_ = e.refreshConfig()
	stats := map[string]store.EndpointStats{}
	if e.notifier == nil {
		return nil, nil
	}
	if e.notifier.ob != nil {
		if stats, err = e.notifier.ob.OutboxStats(); err != nil {
			return nil, classify(err, "")
		}
	}
	var out []deck.NotifyEndpoint
	add := func(ep, kind, target string, events []string) {
		st := stats[ep]
		delete(stats, ep)
		out = append(out, deck.NotifyEndpoint{Endpoint: ep, Kind: kind, Target: target, Events: events,
			Delivered: st.Delivered, Pending: st.Pending, Expired: st.Expired, Failing: st.Failing,
			LastError: st.LastError, LastErrorAt: st.LastErrorAt, LastOK: st.LastOK})
	}
	cfg := e.notifier.config()
	for _, w := range cfg.Webhooks {
		add(w.Endpoint(), "webhook", mcpconfig.RedactURL(w.URL), w.Events)
	}
	for _, c := range cfg.Commands {
		add(c.Endpoint(), "command", c.Argv[0], c.Events)
	}
	for _, ep := range slices.Sorted(maps.Keys(stats)) {
		add(ep, "", "(no longer configured)", nil)
	}
	return out, nil
}

func (n *notifier) failed(endpoint string) {
	c, _ := n.failures.LoadOrStore(endpoint, new(atomic.Int64))
	c.(*atomic.Int64).Add(1)
}

// OutboxStats is the outbox as of a scrape.
type OutboxStats struct {
	// Endpoints is each endpoint's counts in the store (its backlog and
	// oldest undelivered entry among them).
	Endpoints map[string]store.EndpointStats
	// Failures is, by endpoint, the attempts this engine made that failed.
	Failures map[string]int64
}

// outboxStats reads the outbox for Stats; nil when the store has none or
// no endpoint was ever configured or counted.
func (n *notifier) outboxStats() (*OutboxStats, error) {
	if n == nil || n.ob == nil {
		return nil, nil
	}
	eps, err := n.ob.OutboxStats()
	if err != nil {
		return nil, err
	}
	out := &OutboxStats{Endpoints: eps, Failures: map[string]int64{}}
	cfg := n.config()
	for _, w := range cfg.Webhooks {
		out.Failures[w.Endpoint()] = 0
	}
	for _, c := range cfg.Commands {
		out.Failures[c.Endpoint()] = 0
	}
	n.failures.Range(func(k, v any) bool {
		out.Failures[k.(string)] = v.(*atomic.Int64).Load()
		return true
	})
	if len(eps) == 0 && len(out.Failures) == 0 {
		return nil, nil
	}
	return out, nil
}
