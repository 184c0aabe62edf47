package proxy

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/taskdeck/taskdeck/model"
)

// keepAlive is how often a held call tells the agent it is still alive,
// when nothing else changed: clients reset their request timeouts on
// progress, and a held call may last far longer than their defaults.
var keepAlive = 15 * time.Second

// notifier sends a notification to the agent on its open request.
type notifier func(msg []byte)

type notifierKey struct{}

func withNotifier(ctx context.Context, n notifier) context.Context {
	return context.WithValue(ctx, notifierKey{}, n)
}

// progressOf reports a held task's progress to an agent that gave a
// progressToken, as notifications/progress with the task's status
// message: the agent sees the work go on, and its timeout is reset.
func progressOf(ctx context.Context, token any) func(*model.Task) {
	n, _ := ctx.Value(notifierKey{}).(notifier)
	if n == nil || token == nil {
		return nil
	}
	count := 0
	return func(rec *model.Task) {
		count++
		msg := rec.StatusMessage
		if msg == "" {
			msg = string(rec.Status)
		}
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "notifications/progress",
			"params": map[string]any{"progressToken": token, "progress": count, "message": msg}})
		n(b)
	}
}

// sseWriter answers one HTTP request as an event stream from its first
// notification on, and as one JSON body if there is none.
type sseWriter struct {
	w       http.ResponseWriter
	modern  bool // a 2026-07-28 request (statusOf)
	mu      sync.Mutex
	started bool
}

func (s *sseWriter) notify(msg []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started {
		s.w.Header().Set("Content-Type", "text/event-stream")
		s.w.Header().Set("Cache-Control", "no-cache")
		s.w.WriteHeader(http.StatusOK)
		s.started = true
	}
	s.w.Write([]byte("event: message\ndata: "))
	s.w.Write(msg)
	s.w.Write([]byte("\n\n"))
	_ = http.NewResponseController(s.w).Flush()
}

// finish writes the answer.
func (s *sseWriter) finish(res *response) {
	s.mu.Lock()
	started := s.started
	s.mu.Unlock()
	if started {
		s.notify(res.encode())
		return
	}
	writeHTTP(s.w, statusOf(res, s.modern), res)
}
