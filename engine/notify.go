package engine

import (
	"os"

	mcpconfig "github.com/taskdeck/taskdeck/mcpclient/config"
	"github.com/taskdeck/taskdeck/notify"
	"github.com/taskdeck/taskdeck/store"
)

// openNotify makes st commit the events the config's "notify" endpoints
// want to its outbox (issue 27) and returns the Deliverer that sends them,
// to start once the engine is open: in the store's owner, and on a fleet in
// each claiming engine (the outbox's claims give each event to one). nil
// when nothing is configured, or this engine only watches a fleet.
func openNotify(st store.Backend, opts Options) (*notify.Deliverer, error) {
	var n mcpconfig.Notify
	if opts.Config != nil {
		n = opts.Config.Notify
	}
	ob, ok := st.(store.Outbox)
	if n.Empty() || !ok {
		return nil, nil
	}
	ob.SetEvents(notify.Events(n))
	if opts.Store != "" && !opts.Claim {
		return nil, nil
	}
	return notify.New(ob, notify.Options{Notify: n, Lookup: os.LookupEnv, Logger: opts.Logger.With("component", "notify")})
}
