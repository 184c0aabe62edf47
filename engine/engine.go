package engine

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/engine/fleet"
	"github.com/taskdeck/taskdeck/mcpclient"
	mcpconfig "github.com/taskdeck/taskdeck/mcpclient/config"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store"
	"github.com/taskdeck/taskdeck/tracing"
)

// Options configure an engine. Zero values select the defaults.
type Options struct {
	DataDir string // the store's directory (badger.Open)
	// Store is empty for Badger in DataDir, or a postgres:// connection
	// string: a fleet's shared database, where this engine polls only the
	// tasks it has claimed.
	Store      string
	ClaimLease time.Duration // a claim's lease; DefaultClaimLease when 0
	ClaimRenew time.Duration // how often claims are renewed and taken; DefaultClaimRenew when 0
	// Claim makes this engine a member of the fleet on a shared database:
	// it claims its share of the open tasks and polls them (`serve`).
	// Without it the engine watches: it reads the records and who watches
	// them, and claims only the tasks of servers no member reaches (else
	// nothing would poll them), so that closing it moves no claim.
	Claim  bool
	Config *mcpconfig.Config // servers
	// FollowConfig reads Config's file again when it changes (see
	// reload.go): for an owner that runs while the file is edited.
	FollowConfig bool
	// Retention runs the config's "retention" schedule once the engine
	// watches (see retention.go): for an owner for the long run.
	Retention      bool
	Logger         *slog.Logger     // nil: discard
	ChildStderr    io.Writer        // stdio servers' stderr (the log file)
	Warn           func(string)     // config warnings (pool)
	RequestTimeout time.Duration    // one request to a server; mcpclient.DefaultRequestTimeout when 0
	Policy         model.PollPolicy // zero: model.DefaultPollPolicy (tests make it fast)
	PerServer      int              // polls in flight per server; mcpclient.DefaultPerServer when 0
	// PushSafety is how often a task the server pushes is polled all the
	// same; 0: twenty times the policy's cap (10 min by default).
	PushSafety time.Duration
	// Now is the clock of the timestamps this engine writes in records
	// (time.Now when nil). Nothing on a fleet compares them with another
	// engine's clock; tests make one skewed.
	Now func() time.Time
	// PushSilence: a push stream that carries nothing, not even a
	// keep-alive, for this long is taken as dropped (its tasks polled at
	// once, then re-subscribed); 0: mcpclient.DefaultPushSilence (1 min).
	PushSilence time.Duration
	// Observer hears polls, calls, answers and push streams as they
	// happen (telemetry's metrics); nil: nobody.
	Observer Observer
	// Tracer makes the spans of the tasks this engine follows (tracing's
	// FromEnv); nil: tracing off.
	Tracer *tracing.Tracer
	// pushLimits, when set, replace the bounds on push streams (tests).
	pushLimits pushLimits
	// retentionEvery, when set, replaces retentionEvery (tests).
	retentionEvery time.Duration
}

// Engine is the Deck in process: the owner of the store, its run loop and
// its feed.
type Engine struct {
	opts      Options
	auditKey  []byte          // seals the audit log; nil: a fleet without one
	auditTail store.AuditTail // the store's, for CheckAuditKey
	log       *slog.Logger
	store     store.Backend
	own       owner          // which tasks this engine holds, and how it writes them
	claims    *fleet.Claimer // nil on Badger: the sole owner polls every task
	health    *fleet.Health  // nil on Badger
	pool      *mcpclient.Pool
	tracker   *tracker
	feeds     *hub
	pushes    pushView
	cfg       *followedConfig // the config in use
	retention retainer
	notifier  *notifier // the "notify" endpoints (notify.go)
	// deadlineWake wakes the deadline watch (deadline.go).
	deadlineWake chan struct{}
	// orphans is what Open found orphaned, for the reconcile report.
	orphans int
	// host names this host in the acts of a fleet ("" on Badger).
	host string

	// ctx ends at Close; every request and poll runs under it.
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex
	closed bool
	// draining refuses new requests while Drain waits for those in
	// progress (requests) to end by themselves.
	draining bool
	ops      sync.WaitGroup // requests in progress, and the loop
	requests sync.WaitGroup // requests in progress only
	loop     *loop          // nil until the first Watch or PollNow
	bulk     bulkSlots      // CancelMany's requests in flight per server
}

var _ deck.Deck = (*Engine)(nil)

// Open opens the store, the connection pool and the tracker, and on
// Badger turns stale `calling` intents into `orphaned`: the store's lock
// makes this process the sole writer, so any intent still calling is a
// crash's. On a shared database another live engine's call may be in
// flight, so nothing is orphaned there. It sends nothing.
func Open(opts Options) (*Engine, error) {
	opts.Logger = cmp.Or(opts.Logger, slog.New(slog.DiscardHandler))
	opts.RequestTimeout = cmp.Or(opts.RequestTimeout, mcpclient.DefaultRequestTimeout)
	opts.PerServer = cmp.Or(opts.PerServer, mcpclient.DefaultPerServer)
	st, claims, key, err := openBackend(opts)
	if err != nil {
		return nil, classify(err, "")
	}
	if claims != nil {
		// Every line names the engine, as its metrics do.
		opts.Logger = opts.Logger.With("engine", claims.Name())
	}
	notifier, err := openNotify(st, opts)
	if err != nil {
		return nil, classify(errors.Join(deck.Errorf(deck.KindUsage, "%v", err), st.Close()), "")
	}
	e := &Engine{opts: opts, log: opts.Logger, claims: claims, host: fleetHost(claims != nil), auditKey: key, cfg: newFollowedConfig(opts.Config), notifier: notifier,
		deadlineWake: make(chan struct{}, 1)}
	e.auditTail, _ = st.(store.AuditTail)
	e.feeds = newHub(e)
	if claims != nil {
		e.watchHealth(claims.Shared())
	}
	pool := mcpclient.NewPool(mcpclient.PoolOptions{
		Config:         opts.Config,
		Logger:         opts.Logger.With("component", "mcp"),
		ChildStderr:    opts.ChildStderr,
		Warn:           opts.Warn,
		RequestTimeout: opts.RequestTimeout,
		PushSilence:    opts.PushSilence,
		IdlePerServer:  opts.PerServer,
	})
	e.ctx, e.cancel = context.WithCancel(context.Background())
	if opts.Tracer != nil {
		st = spanWrites{Backend: st, spans: opts.Tracer, now: opts.Now}
	}
	e.own = soleOwner{st}
	if claims != nil {
		e.own = fleetOwner{e}
	}
	tr := newTracker(st, pool, trackerOptions{Policy: opts.Policy, Now: opts.Now, Logger: opts.Logger, RequestTimeout: opts.RequestTimeout, Context: e.ctx,
		owner: e.own, actor: model.EngineActor(e.host), Observer: opts.Observer, Tracer: opts.Tracer})
	tr.servers = newServerPolls(notifier, e.engineName(), opts.Logger)
	var orphans []*model.Task
	if e.own.alone() {
		if orphans, err = tr.OrphanStale(); err != nil {
			e.cancel()
			pool.Close()
			return nil, classify(errors.Join(err, st.Close()), "")
		}
	}
	e.store, e.pool, e.tracker, e.orphans = st, pool, tr, len(orphans)
	e.watchStore()
	notifier.start()
	return e, nil
}

// begin admits a request: it runs under ctx and ends at Close too, which
// waits for it.
func (e *Engine) begin(ctx context.Context) (context.Context, func(), error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed || e.draining {
		return nil, nil, deck.Errorf(deck.KindFailed, "taskdeck is closed")
	}
	e.ops.Add(1)
	e.requests.Add(1)
	ctx, cancel := context.WithCancel(deck.WithActor(ctx, e.actor(ctx)))
	stop := context.AfterFunc(e.ctx, cancel)
	return ctx, func() { stop(); cancel(); e.requests.Done(); e.ops.Done() }, nil
}

// Drain refuses new requests and waits for those in progress to end by
// themselves (a call to get its handle committed), until ctx ends; Close
// cancels what is left. An owner handing the store over drains first, so
// that no call in flight is cut off into an orphan.
func (e *Engine) Drain(ctx context.Context) error {
	e.mu.Lock()
	e.draining = true // no Add after this: begin refuses
	e.mu.Unlock()
	done := make(chan struct{})
	go func() {
		e.requests.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// beginChange is begin for a request that changes records, which a
// viewer may not make.
func (e *Engine) beginChange(ctx context.Context, what string) (context.Context, func(), error) {
	ctx, done, err := e.begin(ctx)
	if err != nil {
		return nil, nil, err
	}
	if err := mayChange(ctx, what); err != nil {
		done()
		return nil, nil, err
	}
	return ctx, done, nil
}

// Close stops the loop and every feed, waits for requests in progress
// (which Close cancels), then closes the pool and the store.
func (e *Engine) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	e.mu.Unlock()
	e.cancel()
	e.ops.Wait()
	e.notifier.close()
	e.store.SetCommitHook(nil)
	e.feeds.close()
	e.pool.Close()
	return classify(e.store.Close(), "")
}

// Call implements deck.Deck.
func (e *Engine) Call(ctx context.Context, req deck.CallRequest) (deck.CallResult, error) {
	ctx, done, err := e.beginChange(ctx, "make a call")
	if err != nil {
		return deck.CallResult{}, err
	}
	defer done()
	if _, err := NormalizeArgs(req.Args); err != nil {
		return deck.CallResult{}, deck.Errorf(deck.KindUsage, "%w", err)
	}
	if err := e.refreshFor(req.Server); err != nil {
		return deck.CallResult{}, err
	}
	out, err := e.tracker.Call(ctx, callRequest{
		Server: req.Server, Tool: req.Tool, Args: req.Args, Key: req.Key, Answers: req.Answers, Agent: req.Agent, Repeats: req.Repeats,
		Owner: req.Owner, HandleHash: req.HandleHash,
	})
	return e.called(out, err)
}

// Continue implements deck.Deck.
func (e *Engine) Continue(ctx context.Context, id string, answers map[string]json.RawMessage) (deck.CallResult, error) {
	ctx, done, err := e.beginChange(ctx, "answer")
	if err != nil {
		return deck.CallResult{}, err
	}
	defer done()
	rec, err := e.resolve(id)
	if err != nil {
		return deck.CallResult{}, err
	}
	out, err := e.tracker.Continue(ctx, rec.ID, answers)
	return e.called(out, err)
}

// called schedules a call's task, if it has one to poll, and words the
// outcome for the deck.
func (e *Engine) called(out callOutcome, err error) (deck.CallResult, error) {
	res := deck.CallResult{Task: out.Task, Reused: out.Reused, NeedsInput: out.NeedsInput, Again: out.Again}
	if out.Task != nil {
		res.NeedsInput = out.Task.NeedsInput() // also a reused record's
		e.due(out.Task, false)
	}
	return res, classify(err, idOf(out.Task))
}

// Answer implements deck.Deck.
func (e *Engine) Answer(ctx context.Context, id string, answers map[string]json.RawMessage) (*model.Task, error) {
	ctx, done, err := e.beginChange(ctx, "answer")
	if err != nil {
		return nil, err
	}
	defer done()
	rec, err := e.resolve(id)
	if err != nil {
		return nil, err
	}
	if rec.NeedsInput() {
		out, err := e.tracker.Continue(ctx, rec.ID, answers)
		res, err := e.called(out, err)
		return res.Task, err
	}
	if rec, err = e.tracker.Answer(ctx, rec.ID, answers); rec != nil {
		e.due(rec, true) // the answer may have moved it on
	}
	return rec, classify(err, idOf(rec))
}

// idOf names the record an error leaves behind, if any.
func idOf(rec *model.Task) string {
	if rec == nil {
		return ""
	}
	return rec.ID
}

// Cancel implements deck.Deck: tasks/cancel, then one poll at once.
func (e *Engine) Cancel(ctx context.Context, id string) (*model.Task, error) {
	ctx, done, err := e.beginChange(ctx, "cancel")
	if err != nil {
		return nil, err
	}
	defer done()
	rec, err := e.resolve(id)
	if err != nil {
		return nil, err
	}
	if rec, err = e.tracker.Cancel(ctx, rec.ID); err != nil {
		return rec, classify(err, idOf(rec))
	}
	if e.own.elsewhere(rec) {
		return rec, nil // its watcher's next poll records the outcome
	}
	return e.pollOnce(ctx, rec)
}

// pollOnce polls a task just cancelled (or adopted), so that its outcome
// is on record when the act returns.
func (e *Engine) pollOnce(ctx context.Context, rec *model.Task) (*model.Task, error) {
	res, err := e.tracker.Poll(ctx, rec.ID)
	if errors.Is(err, store.ErrFenced) || (err != nil && ctx.Err() != nil) {
		// Claimed by another meanwhile, or the caller left: the act is
		// done, and the next poll records the outcome.
		return rec, nil
	}
	if err != nil {
		return rec, classify(err, rec.ID)
	}
	e.polled(rec.ID, res)
	return res.Task, nil
}

// Forget implements deck.Deck.
func (e *Engine) Forget(ctx context.Context, id string) error {
	ctx, done, err := e.beginChange(ctx, "forget")
	if err != nil {
		return err
	}
	defer done()
	rec, err := e.resolve(id)
	if err != nil {
		return err
	}
	if l := e.running(); l != nil {
		l.send(func() { l.drop(rec.ID) })
	}
	return classify(e.tracker.Forget(ctx, rec.ID), "")
}

// Prune implements deck.Deck. Pruned records have ended: none is
// scheduled.
func (e *Engine) Prune(ctx context.Context, olderThan time.Duration) (int, error) {
	ctx, done, err := e.beginChange(ctx, "prune")
	if err != nil {
		return 0, err
	}
	defer done()
	n, err := e.tracker.Prune(ctx, olderThan)
	return n, classify(err, "")
}

// Get implements deck.Deck.
func (e *Engine) Get(ctx context.Context, id string) (deck.Entry, error) {
	_, done, err := e.begin(ctx)
	if err != nil {
		return deck.Entry{}, err
	}
	defer done()
	rec, err := e.resolve(id)
	if err != nil {
		return deck.Entry{}, err
	}
	e.own.refresh()
	return e.entry(rec), nil
}

// resolve finds a record by id, unique id prefix, or unique id suffix
// (the dashboard's ID column: ids made in one minute share their start);
// a whole id only by itself, without a scan.
func (e *Engine) resolve(id string) (*model.Task, error) {
	if id == "" {
		return nil, deck.Errorf(deck.KindUsage, "no task id given; `taskdeck ls` lists them")
	}
	// The task id an agent was given is the record's id and a secret
	// (proxy.agentID); its owner may name the record by it.
	id, _, _ = strings.Cut(id, ".")
	rec, err := e.store.Get(id)
	if !errors.Is(err, store.ErrNotFound) {
		return rec, classify(err, "")
	}
	if len(id) >= model.IDLen {
		// A whole id is no part of another: no scan for one that is not there.
		return nil, notFound(id)
	}
	// Two ids tell an ambiguous part; the ids alone are read, not the
	// records.
	ids, err := e.store.MatchIDs(id, 2)
	switch {
	case err != nil:
		return nil, classify(err, "")
	case len(ids) > 1:
		return nil, deck.Errorf(deck.KindUsage, "%q matches several tasks; give more of the id", id)
	case len(ids) == 0:
		return nil, notFound(id)
	}
	rec, err = e.store.Get(ids[0])
	if errors.Is(err, store.ErrNotFound) {
		return nil, notFound(id) // forgotten since
	}
	return rec, classify(err, "")
}

func notFound(id string) error {
	return deck.Errorf(deck.KindNotFound, "no task %q; `taskdeck ls` lists them", id)
}

// wholeID is the record id that id names, as resolve finds it, without
// reading a record that a whole id names: whoever acts on it reads it
// (a poll, once, under the task's lock) and finds it or not.
func (e *Engine) wholeID(id string) (string, error) {
	if whole, _, _ := strings.Cut(id, "."); len(whole) >= model.IDLen {
		return whole, nil
	}
	rec, err := e.resolve(id)
	if err != nil {
		return "", err
	}
	return rec.ID, nil
}

// entry pairs a record with its poll state.
func (e *Engine) entry(rec *model.Task) deck.Entry {
	ps := e.tracker.pollStatus(rec.ID)
	p := deck.PollState{LastPolled: ps.LastPolled, Next: ps.Next, Errors: ps.Errors}
	var safety time.Time
	if p.Pushed, safety = e.pushes.of(rec.ID); !safety.IsZero() {
		p.Next = safety // the tracker's policy does not know of push
	}
	if ps.LastError != nil {
		p.LastError = ps.LastError.Error()
	}
	p.Watcher, p.NoEngine = e.own.watch(rec)
	p.AnswerBy = e.answerDeadline(rec)
	return deck.Entry{Task: rec, Poll: p}
}

// List implements deck.Deck.
func (e *Engine) List(ctx context.Context, f deck.Filter) ([]deck.Entry, error) {
	_, done, err := e.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	e.own.refresh()
	groups, reads, err := groupsOf(f)
	if err != nil {
		return nil, err
	}
	text := strings.ToLower(f.Text)
	pass := func(t *model.Task) (deck.Entry, bool) {
		if !admits(f, text, t) {
			return deck.Entry{}, false
		}
		en := e.entry(t)
		ok := len(groups) == 0 || slices.Contains(f.Statuses, t.Status) || slices.ContainsFunc(groups, func(g deck.Group) bool { return g.Admits(en) })
		return en, ok
	}
	if f.Key != "" { // one record at most, from the key's index
		t, err := e.store.ByKey(f.Key)
		if errors.Is(err, store.ErrNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, classify(err, "")
		}
		if en, ok := pass(t); ok && (f.Before == "" || t.ID < f.Before) {
			return []deck.Entry{en}, nil
		}
		return nil, nil
	}
	if f.Limit > 0 || f.Before != "" {
		out, err := e.listPages(f, reads, pass)
		if err != nil {
			return nil, classify(err, "")
		}
		return out, nil
	}
	var tasks []*model.Task
	if len(reads) > 0 {
		tasks, err = e.store.ByStatus(reads...)
	} else {
		tasks, err = e.store.All()
	}
	if err != nil {
		return nil, classify(err, "")
	}
	slices.SortFunc(tasks, func(a, b *model.Task) int { return strings.Compare(b.ID, a.ID) }) // ids sort by creation
	var out []deck.Entry
	for _, t := range tasks {
		if en, ok := pass(t); ok {
			out = append(out, en)
		}
	}
	return out, nil
}

// listPage is how many records a paged List reads at a time when the
// filter may pass only some of them.
const listPage = 512

// listPages reads the store a page at a time, newest first from
// f.Before, until f.Limit records pass (every one, without a limit): from
// the index of the statuses the filter reads, else the record keys.
func (e *Engine) listPages(f deck.Filter, reads []model.Status, pass func(*model.Task) (deck.Entry, bool)) ([]deck.Entry, error) {
	var out []deck.Entry
	before := f.Before
	for {
		want := listPage
		if f.Limit > 0 && f.Server == "" && f.Tool == "" && f.Text == "" && len(f.Groups) == 0 {
			want = f.Limit - len(out) // each record read passes
		}
		tasks, err := e.store.Page(before, want, reads...)
		if err != nil {
			return nil, err
		}
		for _, t := range tasks {
			if en, ok := pass(t); ok {
				out = append(out, en)
				if len(out) == f.Limit {
					return out, nil
				}
			}
		}
		if len(tasks) < want {
			return out, nil
		}
		before = tasks[len(tasks)-1].ID
	}
}

// groupsOf resolves a filter's groups, and the statuses to read for it.
func groupsOf(f deck.Filter) ([]deck.Group, []model.Status, error) {
	reads := slices.Clone(f.Statuses)
	var groups []deck.Group
	for _, name := range f.Groups {
		g, ok := deck.GroupNamed(name)
		if !ok {
			return nil, nil, deck.Errorf(deck.KindUsage, "no status group %q: the groups are open, waiting, finished and problems", name)
		}
		groups = append(groups, g)
		for _, st := range g.Reads() {
			if !slices.Contains(reads, st) {
				reads = append(reads, st)
			}
		}
	}
	return groups, reads, nil
}

// admits reports whether a record passes the filter's server, tool and
// text (the statuses were read by).
func admits(f deck.Filter, text string, t *model.Task) bool {
	switch {
	case f.Server != "" && t.Server.Name != f.Server && t.Server.URL != f.Server:
		return false
	case f.Tool != "" && t.Tool != f.Tool:
		return false
	case f.Key != "" && t.IdempotencyKey != f.Key:
		return false
	case text == "":
		return true
	}
	for _, s := range []string{string(t.Arguments), t.StatusMessage, string(t.Result)} {
		if strings.Contains(strings.ToLower(s), text) {
			return true
		}
	}
	return false
}

// Servers implements deck.Deck: the configured servers, their URLs
// redacted.
func (e *Engine) Servers(ctx context.Context) ([]deck.Server, error) {
	if err := e.refreshConfig(); err != nil {
		return nil, classify(err, "")
	}
	var out []deck.Server
	cfg := e.config()
	if cfg == nil {
		return out, nil
	}
	for _, name := range cfg.Names() {
		s, err := cfg.Server(name)
		if err != nil {
			return nil, classify(err, "")
		}
		push := e.pushes.state(name)
		srv := deck.Server{Name: name, Target: mcpconfig.RedactURL(s.URL), Push: push.Push, PushError: push.PushError, Retention: e.retentionState()}
		if s.URL == "" {
			srv.Target, srv.Stdio = strings.TrimSpace(s.Command+" "+strings.Join(s.Args, " ")), true
		}
		out = append(out, srv)
	}
	return out, nil
}

// Tools implements deck.Deck.
func (e *Engine) Tools(ctx context.Context, server model.ServerRef, refresh bool) (*deck.ToolList, error) {
	ctx, done, err := e.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	if err := e.refreshFor(server); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, e.opts.RequestTimeout)
	defer cancel()
	sess, err := e.pool.Session(ctx, server)
	if err != nil {
		return nil, classify(err, "")
	}
	list, err := sess.ListedTools(ctx, refresh)
	if err != nil {
		return nil, classify(err, "")
	}
	out := &deck.ToolList{Server: server.String(), SupportsTasks: sess.SupportsTasks, Tools: []deck.Tool{}}
	for _, t := range list.Tools {
		raw := list.Sent(t.Name)
		var sent struct {
			InputSchema json.RawMessage `json:"inputSchema"`
		}
		_ = json.Unmarshal(raw, &sent) // go-sdk decoded it already
		tool := deck.Tool{Name: t.Name, Title: t.Title, Description: t.Description, InputSchema: sent.InputSchema, Raw: raw}
		if args, err := list.Arguments(t.Name); err == nil { // an unreadable schema lists no arguments
			for _, a := range args {
				tool.Arguments = append(tool.Arguments, deck.Argument{
					Name: a.Name, Type: a.Type, Required: a.Required, Default: a.Default, Enum: a.Enum, Range: a.Range,
					Format: a.Format, Header: a.Header, Description: a.Description, Summary: a.Summary(),
				})
			}
		}
		out.Tools = append(out.Tools, tool)
	}
	return out, nil
}
