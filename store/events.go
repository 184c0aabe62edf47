package store

import (
	"sync/atomic"
	"time"

	"github.com/taskdeck/taskdeck/model"
)

// Event is what a change tells: ID (Standard Webhooks' webhook-id, the
// same on every retry), Body (the JSON each endpoint gets), and the
// endpoints that want it.
type Event struct {
	ID        string
	Body      []byte
	Endpoints []string
}

// EventFunc returns the event the change of prev (nil: a new record) into
// next makes, or nil. It is called before the commit, on the writer's
// goroutine; it must be cheap when no endpoint is configured.
type EventFunc func(prev, next *model.Task) *Event

// OutboxEntry is one event still to be delivered to one endpoint.
type OutboxEntry struct {
	Rev      uint64    // the revision of the change that made it
	Endpoint string    // who is to be told
	ID       string    // the webhook-id
	At       time.Time // when it was committed: the retry window starts there
	Body     []byte
	Attempts int // the failed attempts so far
}

// Outcome is the result of one delivery attempt.
type Outcome int

const (
	// Failed: the attempt failed and the event stays (Err says why).
	Failed Outcome = iota
	// Delivered: the endpoint took it; the entry goes.
	Delivered
	// Expired: the retry window ran out; the entry goes, counted.
	Expired
)

// EndpointStats is what an endpoint was told, kept in the store.
type EndpointStats struct {
	Delivered   int64     `json:"delivered"`
	Expired     int64     `json:"expired"`
	LastOK      time.Time `json:"lastOk,omitzero"`
	LastError   string    `json:"lastError,omitempty"`
	LastErrorAt time.Time `json:"lastErrorAt,omitzero"`
	// Failing: the last attempt failed.
	Failing bool `json:"failing"`
	// Pending counts the entries still to deliver, and Oldest is when the
	// oldest of them was committed (not stored: found when read).
	Pending int64     `json:"pending"`
	Oldest  time.Time `json:"oldest,omitzero"`
}

// Outbox is what a backend with an outbox offers the notifier.
type Outbox interface {
	// SetEvents makes every later change commit the event fn returns.
	SetEvents(fn EventFunc)
	// Outbox returns up to limit entries due for delivery (their retry
	// time passed), oldest first; on a fleet, it claims them for lease so
	// that no other engine delivers them meanwhile.
	Outbox(limit int, lease time.Duration) ([]OutboxEntry, error)
	// OutboxDone records the outcome of delivering e; a Failed one is
	// due again at retryAt.
	OutboxDone(e OutboxEntry, o Outcome, errText string, retryAt time.Time) error
	// OutboxRelease gives back entries Outbox claimed that this engine
	// does not send now (no free slot, or it is closing): they are due
	// again at once, to any engine, not after their lease.
	OutboxRelease(entries []OutboxEntry) error
	// OutboxStats returns each endpoint's stats, with its pending count.
	OutboxStats() (map[string]EndpointStats, error)
	// OutboxAdd commits ev on its own: an event no task change makes (a
	// server's polls failing). Its entries' Rev is a SoloRev.
	OutboxAdd(ev *Event) error
}

// soloBit marks the Rev of an event committed on its own (OutboxAdd): no
// revision of a change has it, so the two never share a key.
const soloBit = 1 << 63

// SoloRev names an event committed on its own at now: the time in ns
// with soloBit set, unique in this process (strictly increasing), and on
// a fleet unless two engines add one in the same nanosecond (the second
// is then refused and logged).
func SoloRev(now time.Time) uint64 {
	for {
		last := lastSolo.Load()
		next := max(uint64(now.UnixNano())|soloBit, last+1)
		if lastSolo.CompareAndSwap(last, next) {
			return next
		}
	}
}

var lastSolo atomic.Uint64
