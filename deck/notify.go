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

// deadlineLayouts are the times ParseDeadline reads besides RFC 3339: a
// local date and time.
var deadlineLayouts = []string{"2006-01-02T15:04", "2006-01-02 15:04"}

// ParseDeadline reads what an operator gives SetDeadline (the command
// line's `deadline` and `answer --deadline`, the dashboard's prompt): a
// duration from now, a time, or "none" (zero). A time not after now is
// refused (KindUsage).
func ParseDeadline(s string, now time.Time) (time.Time, error) {
	if s == "none" {
		return time.Time{}, nil
	}
	at, ok := time.Time{}, false
	if d, err := time.ParseDuration(s); err == nil {
		at, ok = now.Add(d), true
	} else if t, err := time.Parse(time.RFC3339, s); err == nil {
		at, ok = t, true
	} else {
		for _, layout := range deadlineLayouts {
			if t, err := time.ParseInLocation(layout, s, time.Local); err == nil {
				at, ok = t, true
				break
			}
		}
	}
	if !ok {
		return at, Errorf(KindUsage, "deadline %q: want a duration such as 2h or 30m, a time such as 2026-12-02T17:00:00Z or \"2026-12-02 17:00\" (local), or none", s)
	}
	if !at.After(now) {
		return at, Errorf(KindUsage, "deadline %s is in the past; give a later time or a positive duration such as 2h", at.Format(time.RFC3339))
	}
	return at, nil
}
