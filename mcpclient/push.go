package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/taskdeck/taskdeck/mcpclient/config"
	"github.com/taskdeck/taskdeck/mcpclient/wire"
	"github.com/taskdeck/taskdeck/model"
)

// Push (spec §8). go-sdk v1.8.0 keeps subscriptions/listen to itself and
// its filter has no taskIds, nor does it route notifications/tasks, so a
// listen goes out on the direct path, as the fast tasks/get does.

// DefaultPushSilence is how long a listen stream may carry nothing, not
// even a keep-alive, before it is taken as dropped (issue 20, item 11: one
// that acknowledged and then fell silent hid a task's end until the
// safety poll). Servers that push send a keep-alive well within it (the demo:
// every 15 s); one that does not costs a re-subscribe a minute while its
// tasks are quiet.
const DefaultPushSilence = time.Minute

// ErrNoPush means that the server will not push these tasks' changes. It refused the
// listen, ignored it (no acknowledgement in time, or one of no ids), or
// push is not offered over its transport (stdio). The caller polls; asking
// again soon would get the same answer.
var ErrNoPush = errors.New("the server does not push task changes")

// noPushError is ErrNoPush for one server, with why.
type noPushError struct {
	server, why string
	// answered: the server answered the listen with a stream and an
	// acknowledgement, of none of the ids (doctor's made-up one).
	answered bool
}

func (e *noPushError) Error() string {
	return fmt.Sprintf("server %s does not push task changes: %s", e.server, e.why)
}

func (e *noPushError) Is(target error) bool { return target == ErrNoPush }

// Pushed is one notifications/tasks: the task's state as tasks/get would
// answer it.
type Pushed struct {
	TaskID   string
	Snapshot *model.Snapshot
}

// Subscription is one open listen stream. Events delivers what the server
// pushes, in order, and is closed when the stream ends; Err then says how.
type Subscription struct {
	acked   []string
	events  chan Pushed
	cancel  context.CancelFunc
	closing atomic.Bool   // Close was called
	done    chan struct{} // closed once the reader has returned and err is set
	err     error
}

// Acknowledged is the ids the server agreed to push, in its order: the
// requested ones it acknowledged. Poll every other requested id.
func (sub *Subscription) Acknowledged() []string { return sub.acked }

// Events delivers each notification for an acknowledged task, in the
// order the server sent them; it is closed when the stream ends.
func (sub *Subscription) Events() <-chan Pushed { return sub.events }

// Err says how the stream ended, once Events is closed: nil for the
// server's graceful end or after Close; the context's error when the
// context given to Listen ended; else a *TransportError (a drop, a stream
// silent for longer than the pool's PushSilence, a message that does not
// decode, one past the size bound: re-subscribe with backoff, poll
// meanwhile) or, for a JSON-RPC error that ended the stream,
// a *ServerError.
func (sub *Subscription) Err() error {
	<-sub.done
	return sub.err
}

// Close ends the stream and waits until its reader has returned.
func (sub *Subscription) Close() {
	sub.closing.Store(true)
	sub.cancel()
	<-sub.done
}

// listenIDPrefix starts listen ids, which share the direct requests'
// numbering.
const listenIDPrefix = "td-listen-"

// Listen subscribes to push for taskIDs on the session's server and
// returns once the server has acknowledged the ids it agrees to push. ctx
// bounds the whole stream; waiting for the acknowledgement is also
// bounded by the session's request timeout.
//
// An error matching ErrNoPush means the server does not push these tasks
// (refused, ignored, stdio): poll them. Any other error (a
// *TransportError) is a failure to reach it: try again with backoff.
func (s *Session) Listen(ctx context.Context, taskIDs []string) (*Subscription, error) {
	server := s.ref.String()
	if s.legacy != nil {
		return nil, s.noPush("the 2025-11-25 revision pushes no task states")
	}
	if s.direct == nil {
		return nil, s.noPush("push is offered only over HTTP, not over stdio")
	}
	if len(taskIDs) == 0 {
		return nil, errors.New("listen: no task ids to subscribe to")
	}
	id := listenIDPrefix + strconv.FormatInt(directIDs.Add(1), 10)
	params, err := json.Marshal(listenParams{Meta: s.direct.meta, Notifications: wire.ListenFilter{TaskIDs: taskIDs}})
	if err != nil {
		return nil, err
	}
	rpcID, _ := jsonrpc.MakeID(id) // a string is always an id
	body, err := jsonrpc.EncodeMessage(&jsonrpc.Request{ID: rpcID, Method: wire.MethodListen, Params: params})
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	// The answer and its acknowledgement must come within the timeout.
	var timedOut atomic.Bool
	ackTimer := time.AfterFunc(s.timeout, func() { timedOut.Store(true); cancel() })
	defer ackTimer.Stop()
	resp, err := s.direct.post(sctx, wire.MethodListen, body, "")
	if err != nil {
		cancel()
		if timedOut.Load() {
			return nil, &TransportError{Server: config.RedactURLs(server), Err: fmt.Errorf("%s: no answer within %s", wire.MethodListen, s.timeout), Transient: true}
		}
		return nil, classify(server, err, false, nil)
	}
	// Every byte read (an event, a keep-alive) shows the stream alive.
	var silent atomic.Bool
	quiet := time.AfterFunc(s.silence, func() { silent.Store(true); cancel() })
	live := &liveReader{r: resp.Body, timer: quiet, silence: s.silence}
	bounded := &boundedReader{r: live, left: maxResponseBytes, method: wire.MethodListen}
	ctype, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if err := checkStatus(resp, bounded, wire.MethodListen); err != nil || ctype != "text/event-stream" {
		quiet.Stop()
		defer cancel()
		defer drainAndClose(resp.Body)
		return nil, s.refusal(resp.StatusCode, err, ctype, bounded)
	}
	sub := &Subscription{events: make(chan Pushed, 16), cancel: cancel, done: make(chan struct{})}
	r := &listenReader{sess: s, id: id, asked: taskIDs, events: sub.events, ctx: sctx, ack: make(chan []string, 1)}
	go func() {
		defer close(sub.done)
		defer close(sub.events)
		defer cancel()
		defer drainAndClose(resp.Body)
		defer quiet.Stop()
		err := r.read(bounded)
		switch {
		case sub.closing.Load():
			err = nil
		case ctx.Err() != nil:
			err = cleanError{ctx.Err()}
		case silent.Load():
			err = &TransportError{Server: config.RedactURLs(server), Transient: true,
				Err: fmt.Errorf("the %s stream carried nothing, not even a keep-alive, for %s", wire.MethodListen, s.silence)}
		case err != nil && !errors.Is(err, ErrNoPush):
			err = classify(server, err, false, nil)
		}
		sub.err = err
	}()
	ignored := s.noPush(fmt.Sprintf("it did not acknowledge the listen within %s", s.timeout))
	select {
	case sub.acked = <-r.ack:
	case <-sub.done:
		select {
		case sub.acked = <-r.ack: // acknowledged, and over already
		default:
			if timedOut.Load() {
				return nil, ignored
			}
			return nil, sub.err
		}
	}
	if !ackTimer.Stop() && timedOut.Load() { // the acknowledgement came as time ran out
		sub.Close()
		return nil, ignored
	}
	return sub, nil
}

func (s *Session) noPush(why string) error {
	return &noPushError{server: config.RedactURLs(s.ref.String()), why: why}
}

// refusal is what a listen answered otherwise than with a stream means: a
// JSON-RPC error, a client-error status or a plain answer is the server's
// refusal; 429 and 5xx a transport failure (try again later).
func (s *Session) refusal(code int, status error, ctype string, body io.Reader) error {
	var rpc *jsonrpc.Error
	switch {
	case errors.As(status, &rpc):
	case status != nil && code != http.StatusTooManyRequests && code < 500:
		return s.noPush(fmt.Sprintf("it answered the listen with HTTP %d", code))
	case status != nil:
		return classify(s.ref.String(), status, false, nil)
	case ctype == "application/json":
		var m pushMessage
		if raw, err := io.ReadAll(body); err == nil && json.Unmarshal(raw, &m) == nil {
			rpc = m.Error
		}
	}
	if rpc != nil {
		return s.noPush(fmt.Sprintf("it answered the listen with error %d: %s", rpc.Code, RedactedLine(rpc.Message)))
	}
	return s.noPush(fmt.Sprintf("it answered the listen with %q, not a stream", RedactedLine(ctype)))
}

// listenParams are wire.ListenParams with the _meta go-sdk sends, as it
// encodes it (see sentMeta).
type listenParams struct {
	Meta          json.RawMessage   `json:"_meta"`
	Notifications wire.ListenFilter `json:"notifications"`
}

// pushMessage is one JSON-RPC message of a listen stream.
type pushMessage struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *jsonrpc.Error  `json:"error"`
}

// listenReader reads one listen stream for its Subscription.
type listenReader struct {
	sess   *Session
	id     string
	asked  []string
	events chan<- Pushed
	ctx    context.Context
	ack    chan []string // the acknowledged ids, once
	acked  map[string]bool
}

// read reads the stream to its end: nil for the graceful end.
func (r *listenReader) read(body *boundedReader) error {
	ended := false
	err := scanEvents(body, wire.MethodListen, func(data []byte) (bool, error) {
		// The size bound is one message's, not the long stream's.
		body.left = maxResponseBytes
		var m pushMessage
		if tooDeep(data, maxDepth) {
			return true, failed("decoding the %s stream: %w: nested deeper than %d", wire.MethodListen, wire.ErrInvalid, maxDepth)
		}
		if err := json.Unmarshal(data, &m); err != nil {
			return true, failed("decoding the %s stream: %w: %v", wire.MethodListen, wire.ErrInvalid, err)
		}
		if m.Method == "" && (m.Result != nil || m.Error != nil) && r.answers(m.ID) {
			ended = true
			if r.acked == nil {
				return true, r.sess.noPush("the listen stream ended before it acknowledged any task")
			}
			if m.Error != nil {
				return true, m.Error
			}
			return true, nil
		}
		switch m.Method {
		case wire.NotificationAcknowledged:
			return r.acknowledged(m.Params)
		case wire.NotificationTasks:
			return false, r.pushed(m.Params)
		}
		return false, nil // nothing else is ours to read
	})
	if err == nil && !ended {
		if r.acked == nil {
			return r.sess.noPush("the listen stream ended before it acknowledged any task")
		}
		return failed("the %s stream ended without its result", wire.MethodListen)
	}
	return err
}

// answers tells whether id is the listen request's.
func (r *listenReader) answers(id json.RawMessage) bool {
	var got string
	return json.Unmarshal(id, &got) == nil && got == r.id
}

func (r *listenReader) acknowledged(params json.RawMessage) (bool, error) {
	if r.acked != nil {
		return false, nil // a second acknowledgement changes nothing
	}
	var p wire.AcknowledgedParams
	if err := json.Unmarshal(params, &p); err != nil {
		return true, failed("decoding the %s acknowledgement: %w: %v", wire.MethodListen, wire.ErrInvalid, err)
	}
	r.acked = map[string]bool{}
	var ids []string
	for _, id := range p.Notifications.TaskIDs {
		if slices.Contains(r.asked, id) && !r.acked[id] {
			r.acked[id] = true
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return true, &noPushError{config.RedactURLs(r.sess.ref.String()), "it acknowledged none of the tasks", true}
	}
	r.ack <- ids
	return false, nil
}

// pushed hands on a notification for an acknowledged task; one before the
// acknowledgement, or for another task, is not this subscription's.
func (r *listenReader) pushed(params json.RawMessage) error {
	snap, err := wire.DecodeTaskNotification(params)
	if err != nil {
		return &requestError{err}
	}
	if !r.acked[snap.TaskID] {
		r.sess.log.Debug("push: dropped a notification for a task not acknowledged",
			"server", config.RedactURLs(r.sess.ref.String()), "task", RedactedLine(snap.TaskID))
		return nil
	}
	select {
	case r.events <- Pushed{TaskID: snap.TaskID, Snapshot: snap}:
		return nil
	case <-r.ctx.Done():
		return r.ctx.Err()
	}
}

// liveReader puts off its timer at every byte read: the timer ends a
// stream that carries nothing for silence.
type liveReader struct {
	r       io.Reader
	timer   *time.Timer
	silence time.Duration
}

func (l *liveReader) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	if n > 0 {
		l.timer.Reset(l.silence)
	}
	return n, err
}
