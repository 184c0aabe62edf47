package engine

import (
	"context"
	"maps"
	"os"
	"slices"

	"github.com/taskdeck/taskdeck/deck"
	mcpconfig "github.com/taskdeck/taskdeck/mcpclient/config"
	"github.com/taskdeck/taskdeck/notify"
	"github.com/taskdeck/taskdeck/store"
)

// notifier (nil-safe) is the engine's part in issue 27: the store's outbox (nil when
// the backend has none) and the Deliverer that empties it (nil when
// nothing is configured, or this engine only watches a fleet).
type notifier struct {
	cfg mcpconfig.Notify
	ob  store.Outbox
	d   *notify.Deliverer
}

// openNotify makes st commit the events the config's "notify" endpoints
// want to its outbox, and makes the Deliverer that sends them, started
// once the engine is open: in the store's owner, and on a fleet in each
// claiming engine (the outbox's claims give each event to one).
func openNotify(st store.Backend, opts Options) (*notifier, error) {
	n := &notifier{}
	if opts.Config != nil {
		n.cfg = opts.Config.Notify
	}
	n.ob, _ = st.(store.Outbox)
	if n.cfg.Empty() || n.ob == nil {
		return n, nil
	}
	n.ob.SetEvents(notify.Events(n.cfg))
	if opts.Store != "" && !opts.Claim {
		return n, nil
	}
	d, err := notify.New(n.ob, notify.Options{Notify: n.cfg, Lookup: os.LookupEnv, Logger: opts.Logger.With("component", "notify")})
	n.d = d
	return n, err
}

func (n *notifier) start() {
	if n != nil && n.d != nil {
		n.d.Start()
	}
}

// wake: a commit may have added events. Called by the commit hook.
func (n *notifier) wake() {
	if n != nil && n.d != nil {
		n.d.Wake()
	}
}

func (n *notifier) close() {
	if n != nil && n.d != nil {
		n.d.Close()
	}
}

var _ deck.Notifier = (*Engine)(nil)

// NotifyStatus implements deck.Notifier: each configured endpoint, then
// any the outbox still counts that is no longer configured.
func (e *Engine) NotifyStatus(ctx context.Context) ([]deck.NotifyEndpoint, error) {
	_, done, err := e.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
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
	for _, w := range e.notifier.cfg.Webhooks {
		add(w.Endpoint(), "webhook", mcpconfig.RedactURL(w.URL), w.Events)
	}
	for _, c := range e.notifier.cfg.Commands {
		add(c.Endpoint(), "command", c.Argv[0], c.Events)
	}
	for _, ep := range slices.Sorted(maps.Keys(stats)) {
		add(ep, "", "(no longer configured)", nil)
	}
	return out, nil
}
