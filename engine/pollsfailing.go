package engine

import (
	"cmp"
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/taskdeck/taskdeck/mcpclient"
	mcpconfig "github.com/taskdeck/taskdeck/mcpclient/config"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/notify"
)

// serverPolls tells the polls_failing event (issue 27): a server every
// poll of which failed — at least the rule's Polls in a row, over at least
// its After, none answered between — is told once per episode, and once
// more when a poll of it is answered again. A failed poll is one the
// metrics count in poll_failures_total (no usable answer); a poll its
// caller cut off counts neither way. Each engine tells of its own polls:
// on a fleet, each engine polling the server tells its episode.
type serverPolls struct {
	n      *notifier
	engine string // this engine on a fleet ("" alone)
	log    *slog.Logger

	mu sync.Mutex
	// servers holds the servers whose last poll failed: at most one
	// entry per server with open tasks, gone at its next answer.
	servers map[string]*failingServer
}

type failingServer struct {
	ref     model.ServerRef
	since   time.Time // the episode's first failed poll
	failed  int
	lastErr string
	told    bool // polls_failing went out for this episode
}

func newServerPolls(n *notifier, engine string, log *slog.Logger) *serverPolls {
	if n == nil || n.ob == nil {
		return nil // no outbox: nowhere to commit the event
	}
	return &serverPolls{n: n, engine: engine, log: log, servers: map[string]*failingServer{}}
}

// polled hears one poll of a task of ref that ended with err (nil: the
// server answered), under ctx.
func (s *serverPolls) polled(ctx context.Context, ref model.ServerRef, err error) {
	if s == nil || (err != nil && causeOf(ctx, err) == "") {
		return
	}
	cfg := s.n.config()
	rule := cfg.PollsFailing
	rule.Polls = cmp.Or(rule.Polls, mcpconfig.DefaultFailingPolls)
	now := time.Now()
	key := ref.String()
	s.mu.Lock()
	f := s.servers[key]
	var info *notify.ServerInfo
	switch {
	case err == nil && f == nil:
	case err == nil:
		delete(s.servers, key)
		if f.told {
			info = &notify.ServerInfo{Since: f.since, FailedPolls: f.failed, LastError: f.lastErr, RecoveredAt: now}
		}
	default:
		if f == nil {
			f = &failingServer{ref: ref, since: now}
			s.servers[key] = f
		}
		f.failed++
		f.lastErr = mcpclient.RedactedLine(err.Error())
		if !f.told && f.failed >= rule.Polls && now.Sub(f.since) >= rule.After {
			f.told = true
			info = &notify.ServerInfo{Since: f.since, FailedPolls: f.failed, LastError: f.lastErr}
		}
	}
	s.mu.Unlock()
	if info == nil || cfg.Empty() {
		return
	}
	info.Name, info.Engine = key, s.engine
	show := "taskdeck doctor " + ref.Name
	if ref.Name == "" {
		show = "taskdeck doctor --url " + ref.URL
	}
	ev := notify.ServerEvent(cfg, *info, show, now)
	if ev == nil {
		return
	}
	if err := s.n.ob.OutboxAdd(ev); err != nil {
		s.log.Warn("notify: committing a polls_failing event", "server", ServerLabel(ref), "err", err)
		return
	}
	s.n.wake()
}

// engineName names this engine on a fleet ("" alone).
func (e *Engine) engineName() string {
	if e.claims == nil {
		return ""
	}
	return e.claims.Name()
}
