package notify

import (
	"crypto/rand"
	"encoding/json"
	"time"

	mcpconfig "github.com/taskdeck/taskdeck/mcpclient/config"
	"github.com/taskdeck/taskdeck/store"
)

// ServerInfo is what an event of a server (polls_failing) tells: since
// when every poll of it failed, how many, and the last failure's words.
// RecoveredAt is set on the event that ends the episode: a poll answered.
type ServerInfo struct {
	Name        string    `json:"name"`
	Engine      string    `json:"engine,omitempty"` // on a fleet, whose polls these are
	Since       time.Time `json:"since"`
	FailedPolls int       `json:"failedPolls"`
	LastError   string    `json:"lastError,omitempty"`
	RecoveredAt time.Time `json:"recoveredAt,omitzero"`
}

// ServerEvent is the polls_failing event of info for n's endpoints that
// want it (nil: none does). Its type is server.polls_failing, or
// server.polls_recovered once a poll was answered; show is the command
// that probes the server.
func ServerEvent(n mcpconfig.Notify, info ServerInfo, show string, now time.Time) *store.Event {
	kind := mcpconfig.EventPollsFailing
	eps := endpoints(targets(n), func(f mcpconfig.Filter) bool { return f.WantsServer(kind, info.Name) })
	if len(eps) == 0 {
		return nil
	}
	typ := "server.polls_failing"
	if !info.RecoveredAt.IsZero() {
		typ = "server.polls_recovered"
	}
	info.Since, info.RecoveredAt = info.Since.UTC(), info.RecoveredAt.UTC()
	body, err := json.Marshal(Payload{Type: typ, Timestamp: now.UTC().Truncate(time.Millisecond),
		Data: Data{Event: kind, Server: &info, Show: show}})
	if err != nil {
		return nil // plain fields always marshal
	}
	return &store.Event{ID: "msg_" + rand.Text(), Body: body, Endpoints: eps}
}
