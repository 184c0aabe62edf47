package deck

import (
	"context"
	"time"

	"github.com/taskdeck/taskdeck/model"
)

// Notifier is a Deck that reports its event endpoints (issue 27): the
// engine and the owner's socket.
type Notifier interface {
	NotifyStatus(ctx context.Context) ([]NotifyEndpoint, error)
}

// NotifyEndpoint is what one configured "notify" endpoint was told.
type NotifyEndpoint struct {
	Endpoint string `json:"endpoint"` // its name in the outbox
	Kind     string `json:"kind"`     // "webhook" or "command"; "" when no longer configured
	// Target is the webhook's URL (its query redacted) or the command's
	// program.
	Target      string    `json:"target"`
	Events      []string  `json:"events,omitempty"`
	Delivered   int64     `json:"delivered"`
	Pending     int64     `json:"pending"`
	Expired     int64     `json:"expired"`
	Failing     bool      `json:"failing"`
	LastError   string    `json:"lastError,omitempty"`
	LastErrorAt time.Time `json:"lastErrorAt,omitzero"`
	LastOK      time.Time `json:"lastOk,omitzero"`
}

// Deadliner is a Deck that sets deadlines on waits for input (issue 27):
// the engine and the owner's socket.
type Deadliner interface {
	// SetDeadline sets the deadline of the wait for input task id is in,
	// as an operator's act; a zero at removes the one an operator set.
	// A time not in the future is refused (KindUsage), and so is a task
	// that waits for no answer (KindState).
	SetDeadline(ctx context.Context, id string, at time.Time) (*model.Task, error)
}
