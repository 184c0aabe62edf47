package demo

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/taskdeck/taskdeck/mcpclient/wire"
)

// Push (spec §8). go-sdk v1.8.0 serves subscriptions/listen itself, but
// drops notifications.taskIds and cannot send a custom notification, so
// the demo takes a listen that asks for task ids over at the transport
// (the HTTP handler and the stdio connection). A listen for task ids that
// does not declare the extension gets -32021, push or not (the spec's
// MUST). Any other listen, and every listen under Options.NoPush, is left
// to go-sdk, which acknowledges none of the ids and ends the subscription
// at once, as a server without push does.
//
// A stream carries the acknowledgement (the known ids only), then the
// current DetailedTask of each acknowledged task, then one DetailedTask per
// change, in order. It ends with the graceful ListenResult when every
// acknowledged task has ended (the spec leaves this to the server) and
// when the server closes; it ends silently when the client goes.

// maxQueued bounds the changes a subscriber has not read yet; a reader
// that falls this far behind is dropped (its stream ends without the
// graceful result, as a transport drop does). The views a stream opens
// with are not counted: they are one per id asked for (bounded by the
// request's size), and a subscriber that asked for many has not fallen
// behind by asking.
const maxQueued = 1024

// subscription is one listen stream. Its fields are guarded by table.mu.
type subscription struct {
	open    map[string]bool     // acknowledged ids that have not ended
	queue   []wire.DetailedTask // not yet written
	initial int                 // the views the stream opens with, while still queued
	wake    chan struct{}       // cap 1: the queue grew
	dropped bool                // fell maxQueued behind
}

// pushLocked queues t's current view for its subscribers; the caller holds
// tb.mu.
func (tb *table) pushLocked(t *task) {
	var d *wire.DetailedTask
	for sub := range tb.subs {
		if !sub.open[t.id] {
			continue
		}
		if d == nil {
			v := tb.detailLocked(t)
			d = &v
		}
		tb.queueLocked(sub, *d)
		if t.terminal() {
			delete(sub.open, t.id)
		}
	}
}

func (tb *table) queueLocked(sub *subscription, d wire.DetailedTask) {
	if len(sub.queue)-sub.initial >= maxQueued {
		sub.dropped = true
		delete(tb.subs, sub)
	} else {
		sub.queue = append(sub.queue, d)
	}
	select {
	case sub.wake <- struct{}{}:
	default:
	}
}

// subscribe registers a subscription to the known ones of ids and queues
// their current views. It returns the acknowledged ids, in request order.
func (tb *table) subscribe(ids []string) (*subscription, []string, error) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	if tb.closed {
		return nil, nil, errClosed
	}
	sub := &subscription{open: map[string]bool{}, wake: make(chan struct{}, 1)}
	var acked []string
	for _, id := range ids {
		t, ok := tb.lookup(id)
		if !ok || slices.Contains(acked, id) {
			continue
		}
		acked = append(acked, id)
		sub.queue = append(sub.queue, tb.detailLocked(t))
		sub.initial++
		if !t.terminal() {
			sub.open[id] = true
		}
	}
	tb.subs[sub] = struct{}{}
	return sub, acked, nil
}

// next waits for queued views. end says the stream is over: graceful is
// true for a graceful end (every task ended, or the server closed) and false
// when ctx ended or the subscriber was dropped.
func (tb *table) next(ctx context.Context, sub *subscription) (views []wire.DetailedTask, end, graceful bool) {
	for {
		tb.mu.Lock()
		views, sub.queue, sub.initial = sub.queue, nil, 0
		dropped, finished := sub.dropped, len(sub.open) == 0
		if finished || dropped || ctx.Err() != nil || tb.root.Err() != nil {
			delete(tb.subs, sub)
		}
		tb.mu.Unlock()
		switch {
		case dropped:
			return nil, true, false
		case len(views) > 0:
			return views, false, false
		case finished || tb.root.Err() != nil:
			return nil, true, true
		case ctx.Err() != nil:
			return nil, true, false
		}
		select {
		case <-sub.wake:
		case <-ctx.Done():
		case <-tb.root.Done():
		}
	}
}

// listen is a parsed subscriptions/listen that asks for task ids.
type listen struct {
	id     json.RawMessage
	params wire.ListenParams
}

// parseListen parses a listen request body (or stdio line); ok is false
// when it is not one the demo serves itself (go-sdk answers it).
func parseListen(body []byte) (l listen, ok bool) {
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if json.Unmarshal(body, &msg) != nil || msg.Method != wire.MethodListen || len(msg.ID) == 0 ||
		string(msg.ID) == "null" || json.Unmarshal(msg.Params, &l.params) != nil ||
		l.params.Notifications.TaskIDs == nil {
		return listen{}, false
	}
	l.id = msg.ID
	return l, true
}

// check validates a listen's _meta as go-sdk does for other requests;
// header is the MCP-Protocol-Version header ("" over stdio).
func (l listen) check(header string) *jsonrpc.Error {
	version, _ := l.params.Meta[mcp.MetaKeyProtocolVersion].(string)
	_, hasCaps := l.params.Meta[mcp.MetaKeyClientCapabilities]
	switch {
	case version == "" || !hasCaps:
		return invalidParams("_meta must carry %s and %s", mcp.MetaKeyProtocolVersion, mcp.MetaKeyClientCapabilities)
	case header != "" && header != version:
		return &jsonrpc.Error{Code: wire.CodeHeaderMismatch, Message: "header mismatch: MCP-Protocol-Version must equal _meta protocolVersion"}
	case version != wire.ProtocolVersion:
		data, _ := json.Marshal(map[string]any{"supported": []string{wire.ProtocolVersion}, "requested": version})
		return &jsonrpc.Error{Code: wire.CodeUnsupportedVersion, Message: "unsupported protocol version", Data: data}
	case !wire.DeclaresExtension(l.params.Meta):
		return wire.ErrMissingCapability()
	}
	return nil
}

// serveListen runs one subscription to its end, handing each message of
// the stream to write in order; a write error ends it.
func (s *Server) serveListen(ctx context.Context, l listen, write func(any) error) {
	sub, acked, err := s.tasks.subscribe(l.params.Notifications.TaskIDs)
	if err != nil {
		write(errorMessage(l.id, &jsonrpc.Error{Code: wire.CodeInternal, Message: err.Error()}))
		return
	}
	defer s.tasks.unsubscribe(sub)
	s.count(func(st *Stats) { st.Subscriptions++ })
	meta := mcp.Meta{wire.MetaSubscriptionID: l.id}
	ack := &wire.AcknowledgedParams{Notifications: wire.ListenFilter{TaskIDs: acked}}
	ack.Meta = meta
	if write(notification(wire.NotificationAcknowledged, ack)) != nil {
		return
	}
	for {
		views, end, graceful := s.tasks.next(ctx, sub)
		for _, v := range views {
			p := &wire.TaskNotificationParams{DetailedTask: v}
			p.Meta = meta
			if write(notification(wire.NotificationTasks, p)) != nil {
				return
			}
		}
		if end {
			if graceful {
				res := &wire.ListenResult{ResultType: wire.ResultTypeComplete}
				res.Meta = meta
				write(map[string]any{"jsonrpc": "2.0", "id": l.id, "result": res})
			}
			return
		}
	}
}

func (tb *table) unsubscribe(sub *subscription) {
	tb.mu.Lock()
	delete(tb.subs, sub)
	tb.mu.Unlock()
}

func notification(method string, params any) any {
	return map[string]any{"jsonrpc": "2.0", "method": method, "params": params}
}

func errorMessage(id json.RawMessage, e *jsonrpc.Error) any {
	return map[string]any{"jsonrpc": "2.0", "id": id, "error": e}
}

// listenHandler serves over HTTP the listens the demo serves itself, as a
// long-lived SSE stream.
func (s *Server) listenHandler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Header.Get("Mcp-Method") != wire.MethodListen {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, mcp.DefaultMaxRequestBodyBytes))
		if err != nil {
			http.Error(w, "reading body: "+err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		l, ok := parseListen(body)
		// Bad Accept headers and bodies are go-sdk's to reject.
		if !ok || !strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
			next.ServeHTTP(w, r)
			return
		}
		if rpcErr := l.check(r.Header.Get("Mcp-Protocol-Version")); rpcErr != nil {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			json.NewEncoder(w).Encode(errorMessage(l.id, rpcErr))
			return
		}
		if s.opts.NoPush {
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache, no-transform")
		w.WriteHeader(http.StatusOK)
		rc := http.NewResponseController(w)
		rc.Flush()
		var mu sync.Mutex // the keep-alives and the messages take turns
		stop := s.keepAlive(func() error {
			mu.Lock()
			defer mu.Unlock()
			if _, err := io.WriteString(w, ": keep-alive\n\n"); err != nil {
				return err
			}
			return rc.Flush()
		})
		defer stop()
		s.serveListen(r.Context(), l, func(msg any) error {
			data, err := json.Marshal(msg)
			if err != nil {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			if _, err := fmt.Fprintf(w, "event: message\ndata: %s\n\n", data); err != nil {
				return err
			}
			return rc.Flush()
		})
	})
}

// defaultKeepAlive is Options.KeepAlive's default.
const defaultKeepAlive = 15 * time.Second

// keepAlive calls write every Options.KeepAlive until stop is called or
// a write fails; stop waits until no write is under way.
func (s *Server) keepAlive(write func() error) (stop func()) {
	every := cmp.Or(s.opts.KeepAlive, defaultKeepAlive)
	done, over := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(over)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				if write() != nil {
					return
				}
			case <-done:
				return
			}
		}
	}()
	return func() { close(done); <-over }
}

// OnChange registers f to be called at every change of a task's tasks/get
// view (status, statusMessage, pollIntervalMs, inputRequests, outcome),
// with the task's id and its new lastUpdatedAt, before any tasks/get or
// subscriber can see the change. f runs under the server's lock: it must
// return quickly and must not call the Server.
func (s *Server) OnChange(f func(taskID string, at time.Time)) {
	s.tasks.mu.Lock()
	s.tasks.hooks = append(s.tasks.hooks, f)
	s.tasks.mu.Unlock()
}
