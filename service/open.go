package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store"
)

// Options say how Open finds or becomes the owner.
type Options struct {
	DataDir string
	// Own opens the engine in process (taking the store lock). An error
	// of deck.KindLocked means another process holds the store: it may be
	// starting to serve or shutting down, so Open dials and owns again.
	// Nil: never own, only connect (an error, ErrNoOwner, when none runs).
	Own func() (deck.Deck, error)
	// Config is the server configuration file Own's deck resolves server
	// names in; as the owner, this process reports it to its clients.
	Config string
	Logger *slog.Logger
	// Waiting is told, once, when Open has waited a second for a store
	// held by a process that does not serve it (nil: nobody).
	Waiting func(msg string)
	// HandedOver is told when this process, the owner, has handed the
	// store over to the lasting owner pid (taskdeck serve) that asked, and
	// goes on through it (nil: nobody).
	HandedOver func(pid int)
}

// stuckAfter is how long one process may hold the store without serving
// it before Open gives up with the store's error. Short commands own the
// store in turn and hand over, and an owner takes a moment to start or
// stop serving: while the holder changes, or until this long, Open waits.
// (A variable: a test shortens it.)
var stuckAfter = 10 * time.Second

// waitingAfter is when Open says it waits.
const waitingAfter = time.Second

// attempts bounds how often one request is retried through a new owner
// after one that may have received it went away; unsent bounds the
// retries of a request that provably reached none (an owner that
// answered Dial and was gone at the request: short commands owning the
// store in turn, each handing over as it exits).
const (
	attempts = 3
	unsent   = 64
)

// Client is the deck every frontend gets from Open: the owner's, over the
// socket, or the engine in process while this process is the owner.
// Requests cut off by the owner's exit fail over (see the methods).
type Client struct {
	opts Options
	log  *slog.Logger

	// closing ends the feeds at Close.
	closing context.Context
	close   context.CancelFunc

	mu     sync.Mutex
	cur    deck.Deck
	srv    *Server // non-nil while this process owns the store
	gen    uint64  // counts choices, so one failure drops one choice once
	told   bool    // Waiting was told
	closed bool
	// handing, while this process hands the store over, is closed once it
	// has: requests wait for it, then choose the new owner.
	handing chan struct{}
}

// Open connects to the owner in opts.DataDir, or becomes it: it calls
// opts.Own and serves the engine on the socket for as long as the
// returned deck is open.
func Open(ctx context.Context, opts Options) (*Client, error) {
	c := &Client{opts: opts, log: opts.Logger}
	c.closing, c.close = context.WithCancel(context.Background())
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if _, _, err := c.deck(ctx); err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}

var _ deck.Deck = (*Client)(nil)

// Owner reports whether this process owns the store now.
func (c *Client) Owner() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.srv != nil
}

// OwnerConfig reports, while this process works through another owner,
// the server configuration file that owner resolves server names in (""
// when it did not say): calls made here use it, not this process's.
func (c *Client) OwnerConfig() (path string, through bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.cur.(*remote)
	if !ok {
		return "", false
	}
	return r.owner.Config, true
}

var errClosed = deck.Errorf(deck.KindFailed, "the deck is closed")

// deck returns the current choice, choosing when there is none.
func (c *Client) deck(ctx context.Context) (deck.Deck, uint64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.handing != nil && !c.closed {
		handing := c.handing
		c.mu.Unlock()
		select {
		case <-handing:
		case <-ctx.Done():
			c.mu.Lock()
			return nil, 0, &deck.Error{Kind: deck.KindCanceled, Message: ctx.Err().Error(), Err: ctx.Err()}
		}
		c.mu.Lock()
	}
	if c.closed {
		return nil, 0, errClosed
	}
	if c.cur == nil {
		d, srv, err := c.choose(ctx)
		if err != nil {
			return nil, 0, err
		}
		c.cur, c.srv = d, srv
		c.gen++
	}
	return c.cur, c.gen, nil
}

// drop forgets choice gen after its owner went away (an owner in this
// process does not go away under its own requests).
func (c *Client) drop(gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen == c.gen && c.cur != nil && c.srv == nil {
		c.cur.Close()
		c.cur = nil
	}
}

// choose dials the owner, or becomes it, retrying while the store is
// locked by a process that does not answer on the socket, until one
// process has held it so for stuckAfter.
func (c *Client) choose(ctx context.Context) (deck.Deck, *Server, error) {
	start := time.Now()
	holder, since := -1, start
	wait := 5 * time.Millisecond
	for {
		d, err := Dial(ctx, c.opts.DataDir)
		if err == nil {
			c.log.Debug("working through the owner", "dir", c.opts.DataDir)
			return d, nil, nil
		}
		if !errors.Is(err, ErrNoOwner) || c.opts.Own == nil {
			return nil, nil, err
		}
		now := time.Now()
		if taker := takingOver(c.opts.DataDir); taker != 0 {
			// A serve is taking the store over: it is its to open, and
			// the wait is bounded by the mark's own age, not stuckAfter.
			holder, since = taker, now
			c.tell(now.Sub(start), fmt.Sprintf("waiting for the store %s: taskdeck serve (pid %d) is taking it over", c.opts.DataDir, taker))
		} else {
			own, err := c.opts.Own()
			if err == nil {
				srv, err := Serve(context.Background(), c.opts.DataDir, own, c.log, WithConfig(c.opts.Config), withHandOver(c.handOver))
				if err != nil {
					own.Close()
					return nil, nil, err
				}
				c.log.Debug("owning the store", "dir", c.opts.DataDir)
				return own, srv, nil
			}
			if deck.KindOf(err) != deck.KindLocked {
				return nil, nil, err
			}
			if pid := lockHolder(err); pid != holder {
				holder, since = pid, now // another process in turn: not stuck
			}
			if now.Sub(since) > stuckAfter {
				return nil, nil, err
			}
			// Another deck of this process (a test's) is no taskdeck to name.
			if holder != os.Getpid() {
				who := "another taskdeck"
				if holder > 0 {
					who = fmt.Sprintf("another taskdeck (pid %d)", holder)
				}
				c.tell(now.Sub(start), fmt.Sprintf("waiting for the store %s: %s holds it while it starts or stops serving it", c.opts.DataDir, who))
			}
		}
		select {
		case <-ctx.Done():
			return nil, nil, &deck.Error{Kind: deck.KindCanceled, Message: ctx.Err().Error(), Err: ctx.Err()}
		case <-time.After(wait):
		}
		wait = min(2*wait, 100*time.Millisecond)
	}
}

// tell says msg through Waiting, once, after Open has waited waitingAfter.
func (c *Client) tell(waited time.Duration, msg string) {
	if !c.told && waited > waitingAfter && c.opts.Waiting != nil {
		c.told = true
		c.opts.Waiting(msg)
	}
}

// handOver hands the store over to the lasting owner pid that asked (see
// AskHandOver): the socket stops serving (its requests in flight are
// answered), the engine's requests in flight end by themselves within
// HandOverGrace, the store closes, and this process's requests and feeds
// go on through the new owner (the feeds from their last revision).
func (c *Client) handOver(pid int) {
	c.mu.Lock()
	if c.closed || c.srv == nil || c.handing != nil {
		c.mu.Unlock()
		return
	}
	srv, own := c.srv, c.cur
	handing := make(chan struct{})
	c.handing = handing
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), HandOverGrace)
	defer cancel()
	err := srv.Shutdown(ctx)
	if d, ok := own.(interface{ Drain(context.Context) error }); ok {
		if derr := d.Drain(ctx); derr != nil {
			c.log.Warn("handing over: requests still in flight are cut off", "after", HandOverGrace)
		}
	}
	if err = errors.Join(err, own.Close()); err != nil {
		c.log.Warn("handing over: closing the store", "err", err)
	}
	c.mu.Lock()
	c.cur, c.srv, c.handing = nil, nil, nil
	c.gen++
	c.mu.Unlock()
	close(handing)
	c.log.Info("handed the store over", "dir", c.opts.DataDir, "to", pid)
	if c.opts.HandedOver != nil {
		c.opts.HandedOver(pid)
	}
}

// lockHolder is the pid a store-locked error names (0: unknown).
func lockHolder(err error) int {
	var le *store.LockedError
	if errors.As(err, &le) {
		return le.PID
	}
	return 0
}

// Close ends this process's part: as the owner, it stops serving (the
// requests in flight finish, watchers fail over) and closes the engine.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	c.close()
	if c.cur == nil {
		return nil
	}
	var err error
	if c.srv != nil {
		err = c.srv.Shutdown(context.Background())
	}
	return errors.Join(err, c.cur.Close())
}

// retry says whether a request that failed with err may be sent again
// through a new choice of owner.
type retry func(err error) bool

// readOnly requests are retried whenever the owner went.
func readOnly(err error) bool { return deck.KindOf(err) == deck.KindOwnerGone }

// changing requests are retried only when they never reached an owner.
func changing(err error) bool { return errors.Is(err, ErrNoOwner) }

func do[T any](ctx context.Context, c *Client, again retry, fn func(deck.Deck) (T, error)) (T, error) {
	for n, m := 0, 0; ; {
		d, gen, err := c.deck(ctx)
		if err != nil {
			var zero T
			return zero, err
		}
		v, err := fn(d)
		if errors.Is(err, ErrNoOwner) {
			m++
		} else {
			n++
		}
		if err == nil || n == attempts || m == unsent || !again(err) {
			return v, err
		}
		c.log.Debug("the owner went; choosing again", "err", err)
		c.drop(gen)
	}
}

// Call is retried after the owner went mid-request only when it has a
// Key: a second send with the key returns the record the first made.
func (c *Client) Call(ctx context.Context, req deck.CallRequest) (deck.CallResult, error) {
	again := changing
	if req.Key != "" {
		again = readOnly
	}
	return do(ctx, c, again, func(d deck.Deck) (deck.CallResult, error) { return d.Call(ctx, req) })
}

func (c *Client) Continue(ctx context.Context, id string, answers map[string]json.RawMessage) (deck.CallResult, error) {
	return do(ctx, c, changing, func(d deck.Deck) (deck.CallResult, error) { return d.Continue(ctx, id, answers) })
}

func (c *Client) Answer(ctx context.Context, id string, answers map[string]json.RawMessage) (*model.Task, error) {
	return do(ctx, c, changing, func(d deck.Deck) (*model.Task, error) { return d.Answer(ctx, id, answers) })
}

func (c *Client) Cancel(ctx context.Context, id string) (*model.Task, error) {
	return do(ctx, c, changing, func(d deck.Deck) (*model.Task, error) { return d.Cancel(ctx, id) })
}

func (c *Client) CancelMany(ctx context.Context, ids []string) []error {
	errs, err := do(ctx, c, changing, func(d deck.Deck) ([]error, error) {
		if r, ok := d.(*remote); ok {
			return r.cancelMany(ctx, ids)
		}
		return d.CancelMany(ctx, ids), nil
	})
	if err != nil {
		errs = make([]error, len(ids))
		for i := range errs {
			errs[i] = err
		}
	}
	return errs
}

func (c *Client) Reconcile(ctx context.Context) (deck.Reconciled, error) {
	return do(ctx, c, changing, func(d deck.Deck) (deck.Reconciled, error) { return d.Reconcile(ctx) })
}

func (c *Client) SettleFound(ctx context.Context, id string, adopt bool) (*model.Task, error) {
	return do(ctx, c, changing, func(d deck.Deck) (*model.Task, error) { return d.SettleFound(ctx, id, adopt) })
}

func (c *Client) Forget(ctx context.Context, id string) error {
	_, err := do(ctx, c, changing, func(d deck.Deck) (empty, error) { return empty{}, d.Forget(ctx, id) })
	return err
}

func (c *Client) Prune(ctx context.Context, olderThan time.Duration) (int, error) {
	return do(ctx, c, changing, func(d deck.Deck) (int, error) { return d.Prune(ctx, olderThan) })
}

func (c *Client) Audit(ctx context.Context, f model.AuditFilter) (deck.AuditLog, error) {
	return do(ctx, c, readOnly, func(d deck.Deck) (deck.AuditLog, error) { return d.Audit(ctx, f) })
}

func (c *Client) VerifyAudit(ctx context.Context) (model.AuditReport, error) {
	return do(ctx, c, readOnly, func(d deck.Deck) (model.AuditReport, error) { return d.VerifyAudit(ctx) })
}

func (c *Client) PruneAudit(ctx context.Context, before time.Time) (int, error) {
	return do(ctx, c, changing, func(d deck.Deck) (int, error) { return d.PruneAudit(ctx, before) })
}

func (c *Client) PollNow(ctx context.Context, ids []string) error {
	_, err := do(ctx, c, changing, func(d deck.Deck) (empty, error) { return empty{}, d.PollNow(ctx, ids) })
	return err
}

func (c *Client) Get(ctx context.Context, id string) (deck.Entry, error) {
	return do(ctx, c, readOnly, func(d deck.Deck) (deck.Entry, error) { return d.Get(ctx, id) })
}

func (c *Client) List(ctx context.Context, f deck.Filter) ([]deck.Entry, error) {
	return do(ctx, c, readOnly, func(d deck.Deck) ([]deck.Entry, error) { return d.List(ctx, f) })
}

func (c *Client) Servers(ctx context.Context) ([]deck.Server, error) {
	return do(ctx, c, readOnly, func(d deck.Deck) ([]deck.Server, error) { return d.Servers(ctx) })
}

func (c *Client) Tools(ctx context.Context, server model.ServerRef, refresh bool) (*deck.ToolList, error) {
	return do(ctx, c, readOnly, func(d deck.Deck) (*deck.ToolList, error) { return d.Tools(ctx, server, refresh) })
}

// Watch returns a feed that outlives owners: when one goes, it chooses
// again and resumes with Watch(the last revision it delivered), so its
// watcher misses nothing and sees nothing twice. A feed the owner cut off
// for reading too slowly resumes the same way.
func (c *Client) Watch(ctx context.Context, from uint64) (deck.Feed, error) {
	return c.follow(ctx, from, nil)
}

// WatchWindow is Watch with windowed snapshots, resumed the same way.
func (c *Client) WatchWindow(ctx context.Context, from uint64, w deck.Window) (deck.Feed, error) {
	return c.follow(ctx, from, &w)
}

func (c *Client) follow(ctx context.Context, from uint64, w *deck.Window) (deck.Feed, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(c.closing, func() { cancel(errClosed) })
	var gen uint64       // the owner's generation the feed is from
	watchFailed := false // a re-watch's own error ends the feed
	watch := func(ctx context.Context, from uint64) (deck.Feed, error) {
		feed, g, err := c.watch(ctx, from, w)
		gen, watchFailed = g, err != nil
		return feed, err
	}
	resume := func(_ context.Context, err error) bool {
		switch kind := deck.KindOf(err); {
		case watchFailed || (kind != deck.KindOwnerGone && kind != deck.KindFellBehind):
			cancel(err) // the feed ends with err, and what it holds goes
			return false
		case kind == deck.KindOwnerGone:
			c.log.Debug("the owner went; the feed resumes")
			c.drop(gen)
		default: // the same owner cut this watcher off: it reads on
			c.log.Debug("the feed fell behind; it resumes")
		}
		return true
	}
	f, err := deck.Follow(ctx, from, watch, resume)
	if err != nil {
		stop()
		cancel(nil)
		return nil, err
	}
	context.AfterFunc(ctx, func() { stop() })
	return f, nil
}

func (c *Client) watch(ctx context.Context, from uint64, w *deck.Window) (deck.Feed, uint64, error) {
	var gen uint64
	feed, err := do(ctx, c, readOnly, func(d deck.Deck) (deck.Feed, error) {
		c.mu.Lock()
		gen = c.gen
		c.mu.Unlock()
		if w != nil {
			return d.WatchWindow(ctx, from, *w)
		}
		return d.Watch(ctx, from)
	})
	return feed, gen, err
}
