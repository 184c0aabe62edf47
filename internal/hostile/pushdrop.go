package hostile

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"

	"github.com/taskdeck/taskdeck/mcpclient/wire"
)

// PushDrop cuts subscriptions/listen streams the way a dropped transport
// does: the real server's stream goes through, event by event, until the
// cut; then the connection closes without the listen's graceful result.
type PushDrop struct {
	after int

	mu   sync.Mutex
	open map[*cutWriter]struct{}
	cuts int
}

// DropPush makes every subscriptions/listen stream from now on pass after
// notifications/tasks messages (after ≤ 0: any number) and then be cut, or
// be cut sooner by Drop. On(wire.MethodListen, nil) removes the fault.
func (s *Server) DropPush(after int) *PushDrop {
	p := &PushDrop{after: after, open: map[*cutWriter]struct{}{}}
	s.On(wire.MethodListen, func(w http.ResponseWriter, req *Request) bool {
		ctx, cancel := context.WithCancel(req.HTTP.Context())
		defer cancel()
		cw := &cutWriter{w: w, left: after, cut: cancel}
		p.mu.Lock()
		p.open[cw] = struct{}{}
		p.mu.Unlock()
		req.HTTP = req.HTTP.WithContext(ctx)
		s.Forward(cw, req)
		p.mu.Lock()
		delete(p.open, cw)
		cut := cw.isCut()
		if cut {
			p.cuts++
		}
		p.mu.Unlock()
		if cut {
			// Closes the connection without ending the response.
			panic(http.ErrAbortHandler)
		}
		return true
	})
	return p
}

// Drop cuts every stream open now.
func (p *PushDrop) Drop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for cw := range p.open {
		cw.stop()
	}
}

// Cuts is how many streams have been cut so far.
func (p *PushDrop) Cuts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cuts
}

// cutWriter passes a stream's events on until it is cut; the server's
// writes after the cut fail, so it stops.
type cutWriter struct {
	w    http.ResponseWriter
	cut  context.CancelFunc // ends the request's context at the server
	left int                // notifications/tasks still to pass; ≤ 0 at the start: no limit

	mu      sync.Mutex
	pending []byte // an event not complete yet
	stopped bool
}

var errCut = errors.New("hostile: push stream cut")

func (c *cutWriter) Header() http.Header { return c.w.Header() }

func (c *cutWriter) WriteHeader(code int) { c.w.WriteHeader(code) }

func (c *cutWriter) Write(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return 0, errCut
	}
	c.pending = append(c.pending, b...)
	for {
		i := bytes.Index(c.pending, []byte("\n\n"))
		if i < 0 {
			return len(b), nil
		}
		event := c.pending[:i+2]
		if _, err := c.w.Write(event); err != nil {
			return 0, err
		}
		c.pending = c.pending[i+2:]
		if isTaskNotification(event) && c.left > 0 {
			if c.left--; c.left == 0 {
				http.NewResponseController(c.w).Flush()
				c.stopLocked()
				return len(b), nil
			}
		}
	}
}

func (c *cutWriter) Flush() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.stopped {
		http.NewResponseController(c.w).Flush()
	}
}

func (c *cutWriter) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopLocked()
}

func (c *cutWriter) stopLocked() {
	c.stopped = true
	c.cut()
}

func (c *cutWriter) isCut() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stopped
}

// isTaskNotification tells whether an SSE event carries notifications/tasks.
func isTaskNotification(event []byte) bool {
	for line := range bytes.Lines(event) {
		data, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r\n"), []byte("data:"))
		var msg struct {
			Method string `json:"method"`
		}
		if ok && json.Unmarshal(bytes.TrimSpace(data), &msg) == nil && msg.Method == wire.NotificationTasks {
			return true
		}
	}
	return false
}
