package engine

import (
	"context"
	"errors"
	"time"

	"github.com/taskdeck/taskdeck/mcpclient"
	"github.com/taskdeck/taskdeck/mcpclient/wire"
	"github.com/taskdeck/taskdeck/model"
)

// Observer hears what the engine does as it does it: the metrics of
// package telemetry. Its methods run on the poll and call paths and must
// not block. Options.Observer nil (the default) costs a nil check.
type Observer interface {
	// Polled: one tasks/get to server took took; cause is "" when the
	// server answered, else one of the Cause* words.
	Polled(server string, took time.Duration, cause string)
	// Called: one tools/call round to server took took; cause as Polled's.
	Called(server string, took time.Duration, cause string)
	// Answered: a wait for input on server ended with every request
	// answered, waited after it began.
	Answered(server string, waited time.Duration)
	// PushDropped: one of server's push streams went down.
	PushDropped(server string)
}

// Why a request failed, for Observer (a bounded set: metrics labels).
const (
	CauseTimeout     = "timeout"      // no answer within the request timeout
	CauseTransport   = "transport"    // the connection failed or the HTTP status was not a success
	CauseRedirect    = "redirect"     // the server answered with a redirect, not followed
	CauseServerError = "server_error" // a JSON-RPC error
	CauseUnreadable  = "unreadable"   // an answer that is not what the protocol says
	CauseNoTasks     = "no_tasks"     // the server no longer speaks the tasks extension
	CauseUnknownTask = "unknown_task" // the server no longer knows the task
	CauseOther       = "other"
)

// ServerLabel names a server in metrics and logs: its configured name; a
// call to a bare URL is "adhoc", so that no caller can grow the label set.
func ServerLabel(ref model.ServerRef) string {
	if ref.Name == "" {
		return "adhoc"
	}
	return ref.Name
}

// causeOf sorts a request's failure into one of the Cause* words ("" for
// none, or a request its caller cut off, which is not the server's doing).
func causeOf(ctx context.Context, err error) string {
	var te *mcpclient.TransportError
	var se *mcpclient.ServerError
	switch {
	case err == nil || ctx.Err() != nil:
		return ""
	case errors.As(err, new(*mcpclient.RedirectError)):
		return CauseRedirect
	case errors.Is(err, context.DeadlineExceeded):
		return CauseTimeout
	case errors.Is(err, mcpclient.ErrTaskUnknown):
		return CauseUnknownTask
	case errors.Is(err, mcpclient.ErrNoTasks):
		return CauseNoTasks
	case errors.As(err, &te):
		return CauseTransport
	case errors.Is(err, wire.ErrInvalid):
		return CauseUnreadable
	case errors.As(err, &se):
		return CauseServerError
	}
	return CauseOther
}

// Stats is the engine's state as of a scrape.
type Stats struct {
	// Counts is the store's number of records per status (one read).
	Counts map[model.Status]int
	// Open is, per server, the open tasks this engine has polled, per
	// status (from its memory: no store read); kept only with an
	// Options.Observer, as OldestInput is.
	Open map[string]map[model.Status]int
	// OldestInput is when the longest wait for input among them began
	// (zero: none waits).
	OldestInput time.Time
	// Push is each server's push state (deck.Server.Push; "" none asked).
	Push map[string]string
	// Revision is the store's last revision: the audit chain's head (one
	// entry per committed change).
	Revision uint64
	// AuditEntries is the length of the audit chain kept: the entries
	// since the last audit prune's checkpoint, which `audit verify` reads.
	AuditEntries uint64
	// Fleet is nil on Badger.
	Fleet *FleetStats
	// Outbox is nil with no "notify" endpoint, configured or counted.
	Outbox *OutboxStats
}

// FleetStats is an engine's part in a fleet.
type FleetStats struct {
	Engine    string
	Claims    int       // claims held now
	TakenOver int64     // leases taken over from an engine that stopped renewing them
	Fenced    int64     // writes the database refused: the claim had moved to another engine
	Beat      time.Time // the last heartbeat recorded (zero: none yet)
}

// Stats reads the engine's state for a scrape: the store's counts (one
// read) and what the engine holds in memory.
func (e *Engine) Stats() (Stats, error) {
	rev, counts, err := e.store.CountsAt()
	if err != nil {
		return Stats{}, classify(err, "")
	}
	s := Stats{Counts: counts, Revision: rev, Push: map[string]string{}}
	if e.auditTail != nil {
		cp, err := e.auditTail.AuditCheckpoint()
		if err != nil {
			return Stats{}, classify(err, "")
		}
		if rev > cp.Rev { // a prune after CountsAt may pass rev
			s.AuditEntries = rev - cp.Rev
		}
	}
	if s.Outbox, err = e.notifier.outboxStats(); err != nil {
		return Stats{}, classify(err, "")
	}
	s.Open, s.OldestInput = e.tracker.openStats()
	e.pushes.mu.Lock()
	for name, srv := range e.pushes.servers {
		s.Push[name] = srv.Push
	}
	e.pushes.mu.Unlock()
	if c := e.claims; c != nil {
		v := c.View()
		s.Fleet = &FleetStats{Engine: c.Name(), Claims: len(v.Held), TakenOver: v.TakenOver, Fenced: v.Fenced, Beat: v.Beat}
	}
	return s, nil
}

// openStats counts the open tasks the tracker has polled, by server and
// status, and finds the oldest wait for input among them.
func (t *tracker) openStats() (map[string]map[model.Status]int, time.Time) {
	open := map[string]map[model.Status]int{}
	var oldest time.Time
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, ps := range t.polls {
		if ps.status == "" {
			continue
		}
		by := open[ps.server]
		if by == nil {
			by = map[model.Status]int{}
			open[ps.server] = by
		}
		by[ps.status]++
		if !ps.waiting.IsZero() && (oldest.IsZero() || ps.waiting.Before(oldest)) {
			oldest = ps.waiting
		}
	}
	return open, oldest
}
