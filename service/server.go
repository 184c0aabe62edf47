package service

import (
	"context"
	"encoding/json"
	"errors"
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
	"github.com/taskdeck/taskdeck/store"
)

// drainTimeout bounds how long Shutdown waits for requests in flight.
const drainTimeout = 10 * time.Second

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
	mu       sync.Mutex
	conns    map[net.Conn]http.ConnState
}

// ServeOption adds to what the owner tells its clients.
type ServeOption func(*pingResp)

// WithConfig has the owner report the path of the server configuration
// its deck resolves server names in (see Client.OwnerConfig).
func WithConfig(path string) ServeOption {
	return func(p *pingResp) { p.Config = path }
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
	if err := store.PrepareDir(filepath.Dir(path)); err != nil {
		return nil, err
	}
	l, err := listen(path)
	if err != nil {
		return nil, err
	}
	// Shutdown unlinks the socket itself, before it stops accepting.
	l.SetUnlinkOnClose(false)
	feeds, endFeeds := context.WithCancel(context.Background())
	s := &Server{path: path, log: log, done: make(chan struct{}), feeds: feeds, endFeeds: endFeeds, conns: map[net.Conn]http.ConnState{},
		ln: &peerListener{UnixListener: l, uid: os.Geteuid(), log: log, closed: make(chan struct{}), parked: make(chan struct{})}}
	s.http = &http.Server{
		Handler:           s.closing(withActor(s.routes(d, opts))),
		ConnContext:       peerContext,
		ReadHeaderTimeout: 10 * time.Second,
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
		s.conns[c] = st
	}
}

// connCounts counts the connections with a request in progress, and
// those waiting for one (idle, or new with nothing sent yet).
func (s *Server) connCounts() (busy, waiting int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, st := range s.conns {
		if st == http.StateActive {
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
}

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
		return c, nil
	}
}

func (s *Server) routes(d deck.Deck, opts []ServeOption) http.Handler {
	mux := http.NewServeMux()
	ping := pingResp{Protocol: protocol, PID: os.Getpid()}
	for _, o := range opts {
		o(&ping)
	}
	mux.HandleFunc("GET "+pathPing, func(w http.ResponseWriter, _ *http.Request) {
		reply(w, ping)
	})
	handle(mux, pathCall, d.Call)
	handle(mux, pathContinue, func(ctx context.Context, r answersReq) (deck.CallResult, error) {
		return d.Continue(ctx, r.ID, r.Answers)
	})
	handle(mux, pathAnswer, func(ctx context.Context, r answersReq) (*model.Task, error) {
		return d.Answer(ctx, r.ID, r.Answers)
	})
	handle(mux, pathCancel, func(ctx context.Context, r idReq) (*model.Task, error) {
		return d.Cancel(ctx, r.ID)
	})
	handle(mux, pathCancelMany, func(ctx context.Context, r idsReq) (cancelManyResp, error) {
		errs := d.CancelMany(ctx, r.IDs)
		resp := cancelManyResp{Errors: make([]*deck.Error, len(errs))}
		for i, err := range errs {
			if err != nil {
				resp.Errors[i] = wireError(err)
			}
		}
		return resp, nil
	})
	handle(mux, pathForget, func(ctx context.Context, r idReq) (empty, error) {
		return empty{}, d.Forget(ctx, r.ID)
	})
	handle(mux, pathPrune, func(ctx context.Context, r pruneReq) (pruneResp, error) {
		n, err := d.Prune(ctx, r.OlderThan)
		return pruneResp{n}, err
	})
	handle(mux, pathPollNow, func(ctx context.Context, r pollNowReq) (empty, error) {
		return empty{}, d.PollNow(ctx, r.IDs)
	})
	handle(mux, pathGet, func(ctx context.Context, r idReq) (deck.Entry, error) {
		return d.Get(ctx, r.ID)
	})
	handle(mux, pathList, d.List)
	handle(mux, pathServers, func(ctx context.Context, _ empty) ([]deck.Server, error) {
		return d.Servers(ctx)
	})
	handle(mux, pathTools, func(ctx context.Context, r toolsReq) (*deck.ToolList, error) {
		return d.Tools(ctx, r.Server, r.Refresh)
	})
	handle(mux, pathCheckCall, func(ctx context.Context, r deck.CallRequest) (empty, error) {
		return empty{}, d.CheckCall(ctx, r)
	})
	mux.HandleFunc("POST "+pathWatch, func(w http.ResponseWriter, r *http.Request) { s.watch(w, r, d) })
	if a, ok := d.(deck.Auditor); ok {
		handle(mux, pathAudit, a.Audit)
		handle(mux, pathAuditVerify, func(ctx context.Context, _ empty) (model.AuditReport, error) {
			return a.VerifyAudit(ctx)
		})
		handle(mux, pathAuditPrune, func(ctx context.Context, r auditPruneReq) (pruneResp, error) {
			n, err := a.PruneAudit(ctx, r.Before)
			return pruneResp{n}, err
		})
	}
	return mux
}

// handle serves one unary method: a JSON request in, a JSON answer or a
// deck.Error out.
func handle[Req, Resp any](mux *http.ServeMux, path string, fn func(context.Context, Req) (Resp, error)) {
	mux.HandleFunc("POST "+path, func(w http.ResponseWriter, r *http.Request) {
		var req Req
		if err := decodeRequest(w, r, &req); err != nil {
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

func decodeRequest(w http.ResponseWriter, r *http.Request, v any) error {
	tooBig := deck.Errorf(deck.KindUsage, "the request is over %d MiB; send less at once", maxRequest>>20)
	if r.ContentLength > maxRequest {
		return tooBig
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequest))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return tooBig
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
	if err := decodeRequest(w, r, &req); err != nil {
		replyErr(w, err)
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(s.feeds, cancel)
	defer stop()
	feed, err := d.Watch(ctx, req.From)
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
