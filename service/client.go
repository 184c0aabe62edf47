package service

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/model"
)

// ErrNoOwner is in the chain of an error of a request that never reached
// an owner: nobody accepted on the socket, so nothing was sent.
var ErrNoOwner = errors.New("no taskdeck owner answers")

// errCutOff is in the chain of an error of a request the owner may have
// received before it went away.
var errCutOff = errors.New("the owner went away")

// clientIdle is how long a connection to the owner stays open unused.
// The client never sends on one idle longer, so an exiting owner that
// waits for its clients to close theirs never drops a request it did not
// read (see Server.Shutdown).
const clientIdle = 100 * time.Millisecond

// dialTimeout bounds one connect to the socket; a live owner accepts at
// once (the kernel queues the connection).
const dialTimeout = time.Second

// pingTimeout bounds Dial's first exchange: an owner that accepts and
// never answers is stuck, not slow. (A variable: a test shortens it.)
var pingTimeout = 5 * time.Second

// remote is a deck.Deck over the owner's socket.
type remote struct {
	path   string
	owner  pingResp // what the owner said of itself
	client *http.Client
	// closed ends the feeds when the deck is closed.
	closed context.Context
	close  context.CancelFunc
}

// Dial connects to the owner's socket in dataDir. It fails, with ErrNoOwner
// in the error's chain, when none answers there.
func Dial(ctx context.Context, dataDir string) (deck.Deck, error) {
	path, err := SocketPath(dataDir)
	if err != nil {
		return nil, deck.Errorf(deck.KindUsage, "%w", err)
	}
	if err := checkSocket(path); err != nil {
		return nil, deck.Errorf(deck.KindUsage, "%w", err)
	}
	r := &remote{path: path}
	r.closed, r.close = context.WithCancel(context.Background())
	var owner atomic.Int64 // the pid that accepted Dial's first connection
	dial := func(ctx context.Context, _, _ string) (net.Conn, error) {
		var c net.Conn
		err := checkSocket(path) // again: one planted since is not followed either
		if err == nil {
			err = reach(path, func(addr string) (err error) {
				c, err = (&net.Dialer{Timeout: dialTimeout}).DialContext(ctx, "unix", addr)
				return err
			})
		}
		if err != nil {
			return nil, &dialError{err}
		}
		if owner.Load() == 0 {
			owner.Store(int64(peerPID(c)))
		}
		return c, nil
	}
	r.client = &http.Client{Transport: &http.Transport{DialContext: dial, MaxIdleConnsPerHost: 64,
		IdleConnTimeout: clientIdle, DisableCompression: true}}
	var ping pingResp
	if err := r.ping(ctx, &ping, &owner); err != nil {
		r.Close()
		if errors.Is(err, errStuck) {
			// It holds the socket and the store, and cannot be replaced.
			return nil, deck.Errorf(deck.KindUnreachable, "the taskdeck owner on %s does not answer within %v; stop it (see `fuser %s`) or choose another --data-dir", path, pingTimeout, path)
		}
		if errors.Is(err, errCutOff) {
			// It went away as it was asked who it is: no owner, nothing
			// sent, so Open chooses again (takes over, or dials the next).
			return nil, &deck.Error{Kind: deck.KindOwnerGone, Message: "the taskdeck owner on " + path + " went away; nothing was sent", Err: ErrNoOwner}
		}
		return nil, err
	}
	if ping.Protocol != protocol {
		r.Close()
		return nil, deck.Errorf(deck.KindFailed, "the taskdeck owner on %s (pid %d) speaks protocol %d, this one %d; run one version of taskdeck", path, ping.PID, ping.Protocol, protocol)
	}
	r.owner = ping
	return r, nil
}

// OwnerOf is what the owner d was dialed to (by Dial) said of itself: its
// pid, and whether it serves until stopped (AsLasting). ok is false for a
// deck that is no dialed owner.
func OwnerOf(d deck.Deck) (pid int, lasting, ok bool) {
	r, ok := d.(*remote)
	if !ok {
		return 0, false, false
	}
	return r.owner.PID, r.owner.Lasting, true
}

// busyRounds bounds how many pingTimeouts Dial waits for an owner that
// does not answer but uses the CPU: one busy serving others.
const busyRounds = 6

// errStuck means the owner did not answer its ping, and did not work either.
var errStuck = errors.New("the owner is stuck")

// ping asks the owner who it is. An owner slow to answer is waited for
// while it is busy (its CPU time, read from /proc, grows in each
// pingTimeout, for busyRounds at most); one stopped or idle is stuck.
func (r *remote) ping(ctx context.Context, out *pingResp, owner *atomic.Int64) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- r.do(ctx, http.MethodGet, pathPing, nil, out) }()
	tick := time.NewTicker(pingTimeout)
	defer tick.Stop()
	var last uint64
	for round := 0; ; round++ {
		select {
		case err := <-done:
			return err
		case <-tick.C:
		}
		pid := int(owner.Load())
		ticks, runs := cpuTime(pid)
		if pid == 0 || pid == os.Getpid() || !runs || round > 0 && ticks == last || round+1 >= busyRounds {
			return errStuck
		}
		last = ticks
	}
}

// dialError marks a failed connect: the request was never sent.
type dialError struct{ err error }

func (e *dialError) Error() string { return e.err.Error() }
func (e *dialError) Unwrap() error { return e.err }

// transportError words a failure to exchange with the owner.
func (r *remote) transportError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return &deck.Error{Kind: deck.KindCanceled, Message: ctx.Err().Error(), Err: ctx.Err()}
	}
	var de *dialError
	if errors.As(err, &de) {
		return &deck.Error{Kind: deck.KindOwnerGone,
			Message: fmt.Sprintf("no taskdeck owner answers on %s (%v); nothing was sent", r.path, de.err),
			Err:     ErrNoOwner}
	}
	if closedIdle(err) {
		return &deck.Error{Kind: deck.KindOwnerGone,
			Message: fmt.Sprintf("the taskdeck owner on %s had closed the connection; nothing was sent", r.path),
			Err:     ErrNoOwner}
	}
	return &deck.Error{Kind: deck.KindOwnerGone,
		Message: "the taskdeck owner went away during the request; the record is whatever was committed (see `taskdeck ls`)",
		Err:     fmt.Errorf("%w: %v", errCutOff, err)}
}

// closedIdle tells net/http's "server closed idle connection": the owner
// had closed the kept-alive connection (it died) before the request could
// reach it, which net/http retries only for idempotent requests. The error
// is not exported, so its text is what tells it.
func closedIdle(err error) bool {
	return strings.Contains(err.Error(), "http: server closed idle connection")
}

// send makes one request and returns the answer's body when it is 200.
func (r *remote) send(ctx context.Context, method, path string, in any) (*http.Response, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, deck.Errorf(deck.KindUsage, "cannot encode the request: %w", err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://taskdeck"+path, body)
	if err != nil {
		return nil, deck.Errorf(deck.KindFailed, "%w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	setActor(ctx, req)
	resp, err := r.client.Do(req)
	if err != nil {
		return nil, r.transportError(ctx, err)
	}
	if resp.StatusCode == http.StatusOK {
		return resp, nil
	}
	defer resp.Body.Close()
	var de deck.Error
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxRequest))
	if err != nil {
		return nil, r.transportError(ctx, err)
	}
	if json.Unmarshal(b, &de) != nil || de.Kind == "" || de.Message == "" {
		return nil, deck.Errorf(deck.KindFailed, "the taskdeck owner answered %s with %q", resp.Status, bytes.TrimSpace(b))
	}
	return nil, &de
}

// do makes one unary request and decodes its answer into out.
func (r *remote) do(ctx context.Context, method, path string, in, out any) error {
	resp, err := r.send(ctx, method, path, in)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse+1))
	switch {
	case err != nil:
		return r.transportError(ctx, err)
	case len(b) > maxResponse:
		return deck.Errorf(deck.KindFailed, "the taskdeck owner's answer to %s is over %d MiB", path, maxResponse>>20)
	}
	if err := json.Unmarshal(b, out); err != nil {
		return deck.Errorf(deck.KindFailed, "the taskdeck owner's answer to %s is unreadable (%v)", path, err)
	}
	return nil
}

func (r *remote) Call(ctx context.Context, req deck.CallRequest) (res deck.CallResult, err error) {
	return res, r.do(ctx, http.MethodPost, pathCall, req, &res)
}

func (r *remote) Continue(ctx context.Context, id string, answers map[string]json.RawMessage) (res deck.CallResult, err error) {
	return res, r.do(ctx, http.MethodPost, pathContinue, answersReq{id, answers}, &res)
}

func (r *remote) Answer(ctx context.Context, id string, answers map[string]json.RawMessage) (t *model.Task, err error) {
	return t, r.do(ctx, http.MethodPost, pathAnswer, answersReq{id, answers}, &t)
}

func (r *remote) Cancel(ctx context.Context, id string) (t *model.Task, err error) {
	return t, r.do(ctx, http.MethodPost, pathCancel, idReq{id}, &t)
}

func (r *remote) CancelMany(ctx context.Context, ids []string) []error {
	errs, err := r.cancelMany(ctx, ids)
	if err != nil {
		for i := range errs {
			errs[i] = err
		}
	}
	return errs
}

// cancelMany is CancelMany with a failure of the whole request apart
// (the owner went), which Client acts on.
func (r *remote) cancelMany(ctx context.Context, ids []string) ([]error, error) {
	var resp cancelManyResp
	errs := make([]error, len(ids))
	if err := r.do(ctx, http.MethodPost, pathCancelMany, idsReq{ids}, &resp); err != nil {
		return errs, err
	}
	if len(resp.Errors) != len(ids) {
		return errs, deck.Errorf(deck.KindFailed, "the taskdeck owner answered %d outcomes for %d cancels", len(resp.Errors), len(ids))
	}
	for i, e := range resp.Errors {
		if e != nil {
			errs[i] = e
		}
	}
	return errs, nil
}

func (r *remote) Audit(ctx context.Context, f model.AuditFilter) (l deck.AuditLog, err error) {
	return l, r.do(ctx, http.MethodPost, pathAudit, f, &l)
}

func (r *remote) VerifyAudit(ctx context.Context) (rep model.AuditReport, err error) {
	return rep, r.do(ctx, http.MethodPost, pathAuditVerify, empty{}, &rep)
}

func (r *remote) PruneAudit(ctx context.Context, before time.Time) (int, error) {
	var res pruneResp
	err := r.do(ctx, http.MethodPost, pathAuditPrune, auditPruneReq{before}, &res)
	return res.Count, err
}

func (r *remote) Reconcile(ctx context.Context) (res deck.Reconciled, err error) {
	return res, r.do(ctx, http.MethodPost, pathReconcile, empty{}, &res)
}

func (r *remote) SettleFound(ctx context.Context, id string, adopt bool) (t *model.Task, err error) {
	return t, r.do(ctx, http.MethodPost, pathFound, foundReq{id, adopt}, &t)
}

func (r *remote) Forget(ctx context.Context, id string) error {
	return r.do(ctx, http.MethodPost, pathForget, idReq{id}, &empty{})
}

func (r *remote) Prune(ctx context.Context, olderThan time.Duration) (int, error) {
	var res pruneResp
	err := r.do(ctx, http.MethodPost, pathPrune, pruneReq{olderThan}, &res)
	return res.Count, err
}

func (r *remote) PollNow(ctx context.Context, ids []string) error {
	return r.do(ctx, http.MethodPost, pathPollNow, pollNowReq{ids}, &empty{})
}

func (r *remote) Get(ctx context.Context, id string) (e deck.Entry, err error) {
	return e, r.do(ctx, http.MethodPost, pathGet, idReq{id}, &e)
}

func (r *remote) List(ctx context.Context, f deck.Filter) (es []deck.Entry, err error) {
	return es, r.do(ctx, http.MethodPost, pathList, f, &es)
}

func (r *remote) Servers(ctx context.Context) (s []deck.Server, err error) {
	return s, r.do(ctx, http.MethodPost, pathServers, empty{}, &s)
}

func (r *remote) Tools(ctx context.Context, server model.ServerRef, refresh bool) (tl *deck.ToolList, err error) {
	return tl, r.do(ctx, http.MethodPost, pathTools, toolsReq{server, refresh}, &tl)
}

func (r *remote) Close() error {
	r.close()
	r.client.CloseIdleConnections()
	return nil
}

// Watch returns once the owner has subscribed: what commits after it is
// in the feed.
func (r *remote) Watch(ctx context.Context, from uint64) (deck.Feed, error) {
	return r.watch(ctx, watchReq{From: from})
}

// WatchWindow is Watch with the owner's windowed snapshot.
func (r *remote) WatchWindow(ctx context.Context, from uint64, w deck.Window) (deck.Feed, error) {
	return r.watch(ctx, watchReq{From: from, Window: &w})
}

func (r *remote) watch(ctx context.Context, req watchReq) (deck.Feed, error) {
	if r.closed.Err() != nil {
		return nil, errClosed
	}
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(r.closed, cancel)
	resp, err := r.send(ctx, http.MethodPost, pathWatch, req)
	if err != nil {
		stop()
		cancel()
		return nil, err
	}
	f := &remoteFeed{ch: make(chan deck.Event, 64)}
	go func() {
		defer stop()
		f.read(ctx, cancel, r, resp.Body)
	}()
	return f, nil
}

type remoteFeed struct {
	ch  chan deck.Event
	mu  sync.Mutex
	err error
}

func (f *remoteFeed) Events() <-chan deck.Event { return f.ch }

func (f *remoteFeed) Err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

func (f *remoteFeed) read(ctx context.Context, cancel context.CancelFunc, r *remote, body io.ReadCloser) {
	defer cancel()
	defer body.Close()
	end := func(err error) {
		f.mu.Lock()
		f.err = err
		f.mu.Unlock()
		close(f.ch)
	}
	lim := &valueLimit{r: body}
	dec := json.NewDecoder(lim)
	for {
		var fr frame
		lim.n = 0
		err := dec.Decode(&fr)
		switch {
		case r.closed.Err() != nil:
			end(errClosed)
			return
		case ctx.Err() != nil:
			end(nil)
			return
		case errors.Is(err, errTooBig):
			end(deck.Errorf(deck.KindFailed, "%w", err))
			return
		case err != nil:
			// EOF too: a stream ends with a frame unless the owner went.
			end(r.transportError(ctx, err))
			return
		case fr.Err != nil:
			end(fr.Err)
			return
		case fr.Event == nil:
			continue
		}
		select {
		case f.ch <- *fr.Event:
		case <-ctx.Done():
			if r.closed.Err() != nil {
				end(errClosed)
			} else {
				end(nil)
			}
			return
		}
	}
}

var errTooBig = fmt.Errorf("an event of the feed is over %d MiB", maxResponse>>20)

// valueLimit bounds what one Decode of a stream may read: no event, a
// snapshot included, is bigger than maxResponse.
type valueLimit struct {
	r io.Reader
	n int
}

func (l *valueLimit) Read(p []byte) (int, error) {
	if l.n >= maxResponse {
		return 0, errTooBig
	}
	p = p[:min(len(p), maxResponse-l.n)]
	n, err := l.r.Read(p)
	l.n += n
	return n, err
}

var _ deck.Notifier = (*remote)(nil)

// NotifyStatus implements deck.Notifier.
func (r *remote) NotifyStatus(ctx context.Context) (eps []deck.NotifyEndpoint, err error) {
	return eps, r.do(ctx, http.MethodPost, pathNotifyStatus, empty{}, &eps)
}

var _ deck.Notifier = (*Client)(nil)

// NotifyStatus implements deck.Notifier, through whichever deck serves.
func (c *Client) NotifyStatus(ctx context.Context) ([]deck.NotifyEndpoint, error) {
	return do(ctx, c, readOnly, func(d deck.Deck) ([]deck.NotifyEndpoint, error) {
		nd, ok := d.(deck.Notifier)
		if !ok {
			return nil, deck.Errorf(deck.KindFailed, "the taskdeck that owns the store cannot report its notifications; restart it with this version")
		}
		return nd.NotifyStatus(ctx)
	})
}
