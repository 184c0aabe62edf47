package service

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store/badger"
	"golang.org/x/sync/semaphore"
)

// drainTimeout bounds how long Shutdown waits for requests in flight.
const drainTimeout = 10 * time.Second

// The owner's bounds on its socket (RELIABILITY.md, "Socket bounds"): a
// client, stuck or hostile, of the owner's own user cannot take its file
// descriptors, its memory or its time from the others.
const (
	// idleTimeout closes a kept-alive connection unused this long (a
	// client closes its own after clientIdle, long before).
	idleTimeout = 10 * time.Second
	// headerTimeout bounds reading a request's header.
	headerTimeout = 10 * time.Second
	// maxBodies bounds the bytes of the unary requests in hand at once
	// (read, decoded, being answered): one that does not fit waits.
	maxBodies = 32 << 20
)

// bodyTimeout bounds reading a request's body: a client trickling bytes
// is cut off. (A variable: a test shortens it.)
var bodyTimeout = 30 * time.Second

// maxConns bounds the connections open at once (each costs a descriptor
// and a goroutine). Past it a new connection takes the place of the one
// idle the longest, or, with none idle, is refused in one line. (A
// variable: a test lowers it.)
var maxConns = 256

// Server serves one deck on the owner's socket.
type Server struct {
	path  string
	ln    *peerListener
	http  *http.Server
	log   *slog.Logger
	done  chan struct{} // closed when Serve's accept loop has returned
	feeds context.Context
	// endFeeds ends every Watch stream: a feed never finishes by itself.
	endFeeds context.CancelFunc
	stop     sync.Once
	stopErr  error
	draining atomic.Bool
	bodies   *semaphore.Weighted // maxBodies
	mu       sync.Mutex
	conns    map[net.Conn]connInfo
}

// connInfo is a connection's state and since when.
type connInfo struct {
	state http.ConnState
	since time.Time
}

// ServeOption adds to what the owner tells its clients and does for them.
type ServeOption func(*serveConfig)

type serveConfig struct {
	ping pingResp
	// handOver, set on a transient owner, hands the store over to the
	// lasting owner pid that asks (see AskHandOver).
	handOver func(pid int)
}

// WithConfig has the owner report the path of the server configuration
// its deck resolves server names in (see Client.OwnerConfig).
func WithConfig(path string) ServeOption {
	return func(c *serveConfig) { c.ping.Config = path }
}

// AsLasting has the owner report that it serves until it is stopped: it
// keeps the store, where a dashboard or a command hands it over to such an
// owner (see OwnerOf and AskHandOver).
func AsLasting() ServeOption {
	return func(c *serveConfig) { c.ping.Lasting = true }
}

// withHandOver has a transient owner hand over when asked: fn runs after
// the request is answered, once per request.
func withHandOver(fn func(pid int)) ServeOption {
	return func(c *serveConfig) { c.handOver = fn }
}

// Serve serves d on the socket in dataDir until ctx ends or Shutdown. It
// replaces a stale socket file, refuses one another owner serves, and
// refuses connections from other users before reading a byte of them.
// The caller still owns d: close it after Shutdown.
func Serve(ctx context.Context, dataDir string, d deck.Deck, log *slog.Logger, opts ...ServeOption) (*Server, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	path, err := SocketPath(dataDir)
	if err != nil {
		return nil, err
	}
	// The socket's privacy rests on its directory's.
	if err := badger.PrepareDir(filepath.Dir(path)); err != nil {
		return nil, err
	}
	l, err := listen(path)
	if err != nil {
		return nil, err
	}
	// Shutdown unlinks the socket itself, before it stops accepting.
	l.SetUnlinkOnClose(false)
	feeds, endFeeds := context.WithCancel(context.Background())
	s := &Server{path: path, log: log, done: make(chan struct{}), feeds: feeds, endFeeds: endFeeds, conns: map[net.Conn]connInfo{},
		bodies: semaphore.NewWeighted(maxBodies)}
	s.ln = &peerListener{UnixListener: l, uid: os.Geteuid(), log: log, closed: make(chan struct{}), parked: make(chan struct{}), room: s.makeRoom}
	s.http = &http.Server{
		Handler:           s.closing(withActor(s.routes(d, opts))),
		ConnContext:       peerContext,
		ReadHeaderTimeout: headerTimeout,
		IdleTimeout:       idleTimeout,
		ConnState:         s.connState,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	go func() {
		defer close(s.done)
		if err := s.http.Serve(s.ln); !errors.Is(err, http.ErrServerClosed) {
			log.Warn("socket serving ended", "socket", path, "err", err)
		}
	}()
	go func() {
		select {
		case <-ctx.Done():
			sctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
			defer cancel()
			s.Shutdown(sctx)
		case <-s.done:
		}
	}()
	log.Debug("serving the deck", "socket", path)
	return s, nil
}

// Path is the socket's path.
func (s *Server) Path() string { return s.path }

// Shutdown removes the socket file, serves the connections already made
// to it, lets unary requests in flight finish (until ctx ends, at most
// drainTimeout), and ends every feed (its watchers fail over to the next
// owner). A request that finds no socket was provably never sent, and
// its client sends it to the next owner.
func (s *Server) Shutdown(ctx context.Context) error {
	s.stop.Do(func() {
		ctx, cancel := context.WithTimeout(ctx, drainTimeout)
		defer cancel()
		s.draining.Store(true)
		if err := os.Remove(s.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			s.log.Warn("cannot remove the socket", "socket", s.path, "err", err)
		}
		// Without the file no connection can arrive; those in the
		// listen queue are accepted and served, not reset.
		s.ln.drain()
		select {
		case <-s.ln.parked:
		case <-s.done: // Serve ended already (closed under it)
		case <-ctx.Done():
		}
		// Not http.Server.Shutdown: it closes, unanswered, a connection
		// whose request it reads after it began, and one it closes while
		// idle may carry a request the client could not tell from one cut
		// off. Instead each connection ends by itself: a request on it is
		// answered with Connection: close, and a client closes an idle one
		// after clientIdle (it sends on none idle longer).
		s.endFeeds()
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		stuck := time.Now().Add(idleGrace)
		for ctx.Err() == nil {
			busy, waiting := s.connCounts()
			if busy+waiting == 0 || busy == 0 && time.Now().After(stuck) {
				break
			}
			select {
			case <-tick.C:
			case <-ctx.Done():
			}
		}
		// What is left overran the bound, or is a stuck client's.
		s.stopErr = errors.Join(s.http.Close(), ctx.Err())
		<-s.done
	})
	return s.stopErr
}

// idleGrace is how long Shutdown waits for clients to close their idle
// connections (they do after clientIdle) before it closes them, and for
// a new connection to send its request.
const idleGrace = time.Second

// connState keeps each connection's state, for Shutdown to wait on.
func (s *Server) connState(c net.Conn, st http.ConnState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch st {
	case http.StateClosed, http.StateHijacked:
		delete(s.conns, c)
	default:
		s.conns[c] = connInfo{st, time.Now()}
	}
}

// silentGrace is how long a new connection may send nothing before it
// counts as idle: a live client sends its request as it connects.
const silentGrace = 250 * time.Millisecond

// makeRoom says whether a new connection may be served: under maxConns,
// or once the connection idle the longest is closed for it. A kept-alive
// one is safe to close (its client sends nothing on it unanswered: see
// closedIdle), and so is one that sent nothing in silentGrace.
func (s *Server) makeRoom() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.conns) < maxConns {
		return true
	}
	var oldest net.Conn
	var since time.Time
	for c, ci := range s.conns {
		idle := ci.state == http.StateIdle || ci.state == http.StateNew && time.Since(ci.since) > silentGrace
		if idle && (oldest == nil || ci.since.Before(since)) {
			oldest, since = c, ci.since
		}
	}
	if oldest == nil {
		return false
	}
	oldest.Close()
	delete(s.conns, oldest) // its StateClosed comes later
	return true
}

// connCounts counts the connections with a request in progress, and
// those waiting for one (idle, or new with nothing sent yet).
func (s *Server) connCounts() (busy, waiting int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ci := range s.conns {
		if ci.state == http.StateActive {
			busy++
		} else {
			waiting++
		}
	}
	return busy, waiting
}

// closing answers every request with Connection: close once Shutdown
// has begun, so that the client uses the connection no more.
func (s *Server) closing(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.draining.Load() {
			w.Header().Set("Connection", "close")
		}
		h.ServeHTTP(w, r)
	})
}

// peerListener refuses, at accept, a peer of another user.
type peerListener struct {
	*net.UnixListener
	uid       int
	log       *slog.Logger
	closeOnce sync.Once
	closed    chan struct{}
	draining  atomic.Bool
	parkOnce  sync.Once
	parked    chan struct{} // closed once the queue is drained
	room      func() bool   // whether one more connection may be served
	refusing  atomic.Int32  // connections being refused (refuseFull)
}

// maxRefusing bounds the connections being answered with a refusal at
// once, each for at most a second.
const maxRefusing = 16

// queueDrain is how long Accept waits for more once draining: once the
// socket file is gone nothing more can arrive, so the queue only empties.
const queueDrain = 20 * time.Millisecond

// drain makes Accept take what is queued, then wait for Close.
func (l *peerListener) drain() {
	l.draining.Store(true)
	l.SetDeadline(time.Now().Add(queueDrain)) // wakes a blocked Accept
}

func (l *peerListener) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	return l.UnixListener.Close()
}

func (l *peerListener) Accept() (net.Conn, error) {
	woken := false
	for {
		if l.draining.Load() {
			// A fresh deadline each time: accept(2) is tried before it
			// counts, so a late goroutine still takes what is queued.
			l.SetDeadline(time.Now().Add(queueDrain))
		}
		c, err := l.UnixListener.Accept()
		if errors.Is(err, os.ErrDeadlineExceeded) {
			if !woken {
				woken = true // the wake-up of drain, perhaps late: try again
				continue
			}
			// Drained. http.Server retries timeouts, so park until it
			// closes the listener.
			l.parkOnce.Do(func() { close(l.parked) })
			<-l.closed
			return nil, net.ErrClosed
		}
		if err != nil {
			return nil, err
		}
		if err := admit(c, l.uid); err != nil {
			l.log.Warn("refused a connection to the socket", "err", err)
			c.Close()
			continue
		}
		if !l.room() {
			l.log.Warn("refused a connection to the socket: every connection is in use", "bound", maxConns)
			if l.refusing.Add(1) > maxRefusing {
				c.Close() // a flood: no answer, no descriptor kept
				l.refusing.Add(-1)
				continue
			}
			go func() {
				defer l.refusing.Add(-1)
				refuseFull(c)
			}()
			continue
		}
		return c, nil
	}
}

// refuseFull answers the request on c, whatever it is, with a one-line
// error, and closes c. The request is read first (within a second), so
// that the answer is not lost to a reset.
func refuseFull(c net.Conn) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	if req, err := http.ReadRequest(bufio.NewReader(io.LimitReader(c, 1<<20))); err == nil {
		io.Copy(io.Discard, io.LimitReader(req.Body, 1<<20))
	}
	b, _ := json.Marshal(deck.Error{Kind: deck.KindUnreachable, Message: fmt.Sprintf(
		"the taskdeck owner (pid %d) has all its %d connections in use; try again once some watchers or commands have ended", os.Getpid(), maxConns)})
	fmt.Fprintf(c, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", len(b), b)
}

func (s *Server) routes(d deck.Deck, opts []ServeOption) http.Handler {
	mux := http.NewServeMux()
	cfg := serveConfig{ping: pingResp{Protocol: protocol, PID: os.Getpid()}}
	for _, o := range opts {
		o(&cfg)
	}
	mux.HandleFunc("GET "+pathPing, func(w http.ResponseWriter, _ *http.Request) {
		reply(w, cfg.ping)
	})
	mux.HandleFunc("POST "+pathHandOver, func(w http.ResponseWriter, r *http.Request) {
		s.serveHandOver(w, r, cfg.handOver)
	})
	handle(s, mux, pathCall, d.Call)
	handle(s, mux, pathContinue, func(ctx context.Context, r answersReq) (deck.CallResult, error) {
		return d.Continue(ctx, r.ID, r.Answers)
	})
	handle(s, mux, pathAnswer, func(ctx context.Context, r answersReq) (*model.Task, error) {
		return d.Answer(ctx, r.ID, r.Answers)
	})
	handle(s, mux, pathCancel, func(ctx context.Context, r idReq) (*model.Task, error) {
		return d.Cancel(ctx, r.ID)
	})
	handle(s, mux, pathCancelMany, func(ctx context.Context, r idsReq) (cancelManyResp, error) {
		errs := d.CancelMany(ctx, r.IDs)
		resp := cancelManyResp{Errors: make([]*deck.Error, len(errs))}
		for i, err := range errs {
			if err != nil {
				resp.Errors[i] = wireError(err)
			}
		}
		return resp, nil
	})
	handle(s, mux, pathReconcile, func(ctx context.Context, _ empty) (deck.Reconciled, error) {
		return d.Reconcile(ctx)
	})
	handle(s, mux, pathFound, func(ctx context.Context, r foundReq) (*model.Task, error) {
		return d.SettleFound(ctx, r.ID, r.Adopt)
	})
	handle(s, mux, pathForget, func(ctx context.Context, r idReq) (empty, error) {
		return empty{}, d.Forget(ctx, r.ID)
	})
	handle(s, mux, pathPrune, func(ctx context.Context, r pruneReq) (pruneResp, error) {
		n, err := d.Prune(ctx, r.OlderThan)
		return pruneResp{n}, err
	})
	handle(s, mux, pathPollNow, func(ctx context.Context, r pollNowReq) (empty, error) {
		return empty{}, d.PollNow(ctx, r.IDs)
	})
	handle(s, mux, pathGet, func(ctx context.Context, r idReq) (deck.Entry, error) {
		return d.Get(ctx, r.ID)
	})
	handle(s, mux, pathList, d.List)
	handle(s, mux, pathServers, func(ctx context.Context, _ empty) ([]deck.Server, error) {
		return d.Servers(ctx)
	})
	handle(s, mux, pathTools, func(ctx context.Context, r toolsReq) (*deck.ToolList, error) {
		return d.Tools(ctx, r.Server, r.Refresh)
	})
	// A client older than Call's own check asks before each call: the
	// call it sends next is checked.
	handle(s, mux, pathCheckCall, func(context.Context, deck.CallRequest) (empty, error) {
		return empty{}, nil
	})
	mux.HandleFunc("POST "+pathWatch, func(w http.ResponseWriter, r *http.Request) { s.watch(w, r, d) })
	handle(s, mux, pathAudit, d.Audit)
	handle(s, mux, pathAuditVerify, func(ctx context.Context, _ empty) (model.AuditReport, error) {
		return d.VerifyAudit(ctx)
	})
	handle(s, mux, pathAuditPrune, func(ctx context.Context, r auditPruneReq) (pruneResp, error) {
		n, err := d.PruneAudit(ctx, r.Before)
		return pruneResp{n}, err
	})
	if nd, ok := d.(deck.Notifier); ok {
		handle(s, mux, pathNotifyStatus, func(ctx context.Context, _ empty) ([]deck.NotifyEndpoint, error) {
			return nd.NotifyStatus(ctx)
		})
	}
	handleDeadline(s, mux, d)
	return mux
}

// handle serves one unary method: a JSON request in, a JSON answer or a
// deck.Error out.
func handle[Req, Resp any](s *Server, mux *http.ServeMux, path string, fn func(context.Context, Req) (Resp, error)) {
	mux.HandleFunc("POST "+path, func(w http.ResponseWriter, r *http.Request) {
		var req Req
		release, err := s.decodeRequest(w, r, &req)
		defer release() // the request's memory lives until it is answered
		if err != nil {
			replyErr(w, err)
			return
		}
		resp, err := fn(r.Context(), req)
		if err != nil {
			replyErr(w, err)
			return
		}
		reply(w, resp)
	})
}

// decodeRequest reads a request's body into v, within the bounds: at most
// maxRequest bytes, read within bodyTimeout, and maxBodies bytes of all
// requests in hand at once, counted until release.
func (s *Server) decodeRequest(w http.ResponseWriter, r *http.Request, v any) (release func(), err error) {
	release = func() {}
	if r.ContentLength > maxRequest {
		return release, tooBig()
	}
	n := r.ContentLength
	if n < 0 {
		n = maxRequest // not declared: as much as it may be
	}
	if err := s.bodies.Acquire(r.Context(), n); err != nil {
		return release, deck.Errorf(deck.KindCanceled, "the client went before its request was read")
	}
	release = sync.OnceFunc(func() { s.bodies.Release(n) })
	return release, s.readBody(w, r, v)
}

func tooBig() error {
	return deck.Errorf(deck.KindUsage, "the request is over %d MiB; send less at once", maxRequest>>20)
}

func (s *Server) readBody(w http.ResponseWriter, r *http.Request, v any) error {
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Now().Add(bodyTimeout))
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequest))
	if err == nil {
		// Cleared once read whole: the handler may take long (a call),
		// and the server's read that watches for the client leaving must
		// not time out. A body cut off keeps it: the connection ends.
		rc.SetReadDeadline(time.Time{})
	} else {
		w.Header().Set("Connection", "close")
	}
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return tooBig()
		}
		return deck.Errorf(deck.KindFailed, "reading the request: %v", err)
	}
	if len(body) == 0 {
		return nil
	}
	if err := json.Unmarshal(body, v); err != nil {
		return deck.Errorf(deck.KindUsage, "the request is not what %s takes (%v)", r.URL.Path, err)
	}
	return nil
}

func reply(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// wireError is err as it crosses: a deck.Error's kind and task id kept,
// anything else KindFailed (a context's end, KindCanceled).
func wireError(err error) *deck.Error {
	var de *deck.Error
	if errors.As(err, &de) {
		return &deck.Error{Kind: de.Kind, Message: de.Message, TaskID: de.TaskID}
	}
	kind := deck.KindFailed
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		kind = deck.KindCanceled
	}
	return &deck.Error{Kind: kind, Message: err.Error()}
}

func replyErr(w http.ResponseWriter, err error) {
	we := wireError(err)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(statusOf(we.Kind))
	json.NewEncoder(w).Encode(we)
}

// watch streams d's feed as newline-delimited JSON frames, one flush per
// event, until the client goes, the feed ends or the server shuts down.
func (s *Server) watch(w http.ResponseWriter, r *http.Request, d deck.Deck) {
	var req watchReq
	release, err := s.decodeRequest(w, r, &req)
	release() // a feed's request is small and done with; the feed lasts
	if err != nil {
		replyErr(w, err)
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(s.feeds, cancel)
	defer stop()
	var feed deck.Feed
	if req.Window != nil {
		feed, err = d.WatchWindow(ctx, req.From, *req.Window)
	} else {
		feed, err = d.Watch(ctx, req.From)
	}
	if err != nil {
		replyErr(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	// The headers go at once: the client's Watch returns once the owner
	// has subscribed, so nothing committed after it is missed.
	if rc.Flush() != nil {
		return
	}
	enc := json.NewEncoder(w)
	for ev := range feed.Events() {
		if enc.Encode(frame{Event: &ev}) != nil || rc.Flush() != nil {
			cancel()
			for range feed.Events() {
			}
			return
		}
	}
	// A feed cut by the client or by Shutdown ends without a frame; the
	// client takes a bare end for the owner's going.
	if err := feed.Err(); err != nil && ctx.Err() == nil {
		enc.Encode(frame{Err: wireError(err)})
		rc.Flush()
	}
}
