package engine

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/taskdeck/taskdeck/mcpclient"
	"github.com/taskdeck/taskdeck/mcpclient/wire"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store"
	"github.com/taskdeck/taskdeck/tracing"
)

// tracker joins the MCP client and the store: every handle is on disk
// before anyone hears of it, and every poll's outcome lands in the record.
// Its API is free of UI types so that one owner can serve it to others.
type tracker struct {
	store          store.Backend
	pool           *mcpclient.Pool
	policy         model.PollPolicy
	now            func() time.Time
	log            *slog.Logger
	requestTimeout time.Duration
	// reconciling runs one Reconcile at a time: one that read the records
	// while another made found rows could adopt a task into an orphan
	// that the other recorded as found.
	reconciling sync.Mutex
	// life ends with the owner: a call whose intent is committed runs
	// under it, not under its caller's context (invariant 11).
	life context.Context

	// owner writes the servers' word and names this engine: alone, or a
	// fleet's claims.
	owner owner
	// engine names the tracker's own acts (an orphaning).
	engine model.Actor
	obs    Observer        // nil: nobody
	spans  *tracing.Tracer // nil: tracing off
	// servers hears each poll's outcome for polls_failing; nil: no outbox.
	servers *serverPolls

	mu    sync.Mutex
	polls map[string]*pollState
	tasks taskLocks
}

// pollState is what the tracker remembers between polls of one task. It
// is kept in memory on purpose: a poll that changed nothing writes nothing.
type pollState struct {
	base       time.Duration
	errors     int
	lastErr    error
	lastPolled time.Time
	next       time.Time
	// What a scrape counts (Engine.Stats): the task's server and status
	// as last polled, and since when it waits for input (zero: it does not).
	server  string
	status  model.Status
	waiting time.Time
}

// pollStatus is the poll state of a task, for display.
type pollStatus struct {
	LastPolled time.Time
	Next       time.Time
	Errors     int
	LastError  error
}

// trackerOptions tune a tracker; the zero value is the default.
type trackerOptions struct {
	Policy         model.PollPolicy
	Now            func() time.Time
	Logger         *slog.Logger
	RequestTimeout time.Duration // one request to a server; 30 s when zero
	// Context is the owner's lifetime: a call whose intent is committed
	// goes on under it when its caller leaves (nil: until the server
	// answers, within the request timeout).
	Context context.Context
	owner   owner       // nil: the sole owner of st
	actor   model.Actor // names its own acts; zero: this host's engine
	// Observer hears its polls, calls and answers (telemetry); nil: nobody.
	Observer Observer
	// Tracer makes the spans of its polls, calls, answers and cancels;
	// nil: tracing off.
	Tracer *tracing.Tracer
}

// newTracker makes a tracker over an open store and a pool.
func newTracker(st store.Backend, pool *mcpclient.Pool, opts trackerOptions) *tracker {
	if opts.Policy == (model.PollPolicy{}) {
		opts.Policy = model.DefaultPollPolicy
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.RequestTimeout == 0 {
		opts.RequestTimeout = 30 * time.Second
	}
	if opts.Context == nil {
		opts.Context = context.Background()
	}
	if opts.owner == nil {
		opts.owner = soleOwner{st}
	}
	if opts.actor == (model.Actor{}) {
		opts.actor = model.EngineActor("")
	}
	return &tracker{
		store: st, pool: pool, policy: opts.Policy, now: opts.Now, log: opts.Logger,
		requestTimeout: opts.RequestTimeout, life: opts.Context, polls: map[string]*pollState{}, owner: opts.owner, engine: opts.actor,
		obs: opts.Observer, spans: opts.Tracer,
	}
}

// callRequest is one tools/call to make durable.
type callRequest struct {
	Server model.ServerRef
	Tool   string
	Args   json.RawMessage // a JSON object; empty means {}
	Key    string          // idempotency key; empty means none
	// Answers given up front: a round of input requests they cover
	// (every key) is answered with them at once.
	Answers map[string]json.RawMessage
	Agent   string // who made the call, kept on the record
	Repeats string // the id of the record this call runs again, kept on the record
	// Owner and HandleHash are kept on the record (see model.Task).
	Owner, HandleHash string
}

// callOutcome is what Start or Continue came to.
type callOutcome struct {
	Task   *model.Task
	Reused bool // the key named an existing record of the same call; nothing was sent
	// NeedsInput: the server asked for input before any task exists; the
	// record is input_required with its requests and requestState, to be
	// answered with Continue.
	NeedsInput bool
	Again      []string // keys asked for again after they were answered
}

// maxInputRounds bounds MRTR rounds, as go-sdk does, so a server that
// keeps asking cannot hold a call forever.
const maxInputRounds = 10

// Call makes a tool call durable: the idempotency key is checked (a key
// that names the same call returns its record, unchecked and unsent), the
// call is checked against the server's tool list, the intent is synced,
// tools/call is sent, and the handle (or result) is synced before Call
// returns. Reused is true when the key named an existing task and nothing
// was sent. Input that req.Answers does not
// cover leaves the record NeedsInput (committed, never thrown away), for
// Continue now or after a restart.
func (t *tracker) Call(ctx context.Context, req callRequest) (callOutcome, error) {
	args, err := NormalizeArgs(req.Args)
	if err != nil {
		return callOutcome{}, err
	}
	if req.Key != "" {
		existing, err := t.keyHolder(req.Server, req.Tool, args, req.Key)
		if err != nil || existing != nil {
			return callOutcome{Task: existing, Reused: existing != nil}, err
		}
	}
	sess, err := t.session(ctx, req.Server)
	if err != nil {
		return callOutcome{}, err // nothing was sent, nothing is written
	}
	if err := t.check(ctx, sess, req.Tool, args); err != nil {
		return callOutcome{}, err
	}
	rec := model.NewIntent(req.Server, req.Tool, args, req.Key, t.now())
	rec.Agent, rec.Repeats, rec.Owner, rec.HandleHash = req.Agent, req.Repeats, req.Owner, req.HandleHash
	rec.Act = &model.Act{Kind: model.ActCall, Actor: actorOf(ctx)}
	if req.Repeats != "" {
		rec.Act.Kind = model.ActRerun
	}
	if rec.Engine, err = t.owner.maker(); err != nil {
		return callOutcome{}, err // nothing was sent, nothing is written
	}
	if err := t.store.Create(rec); err != nil {
		var dup *store.DuplicateKeyError
		switch {
		case errors.As(err, &dup) && dup.Existing.ArgsHash == rec.ArgsHash:
			// A concurrent launch of the same call (another shell, another
			// host) won the race: its record is the answer, as if it had
			// been there before this call looked.
			return callOutcome{Task: dup.Existing, Reused: true}, nil
		case errors.As(err, &dup):
			return callOutcome{}, &keyConflictError{Key: req.Key, Existing: dup.Existing}
		}
		return callOutcome{}, err
	}
	return t.rounds(ctx, sess, rec, 0, nil, "", req.Answers)
}

// rounds sends tools/call for the intent rec (status calling) until the
// server answers with a task or a result, or asks for input not given.
// round counts the calls sent before this one. The intent is committed,
// so the call belongs to the owner (invariant 11): it is sent and its
// handle committed and first polled under the owner's lifetime and the
// request timeout, not under ctx, which may end as the caller leaves (an
// agent hanging up, a killed client); ctx only names who acts. upfront
// are answers given before any round asked: a round they cover is sent.
func (t *tracker) rounds(ctx context.Context, sess *mcpclient.Session, rec *model.Task, round int, answers map[string]json.RawMessage, state string, upfront map[string]json.RawMessage) (callOutcome, error) {
	owned, release := t.own(ctx)
	defer release()
	for ; ; round++ {
		sctx, op := t.spans.Start(owned, tracing.OpCall, rec, ServerLabel(rec.Server))
		cctx, cancel := mcpclient.WithRequestTimeout(sctx, t.requestTimeout) // a stopped process keeps its answer
		sent := time.Now()
		out, err := sess.CallTool(cctx, rec.Tool, rec.Arguments, answers, state)
		cancel()
		op.End(nil, err)
		if t.obs != nil {
			t.obs.Called(ServerLabel(rec.Server), time.Since(sent), causeOf(owned, err))
		}
		if err != nil {
			failed, err := t.callFailed(rec.ID, sess, err)
			return callOutcome{Task: failed}, err
		}
		switch out.ResultType {
		case wire.ResultTypeTask:
			rec, err = t.handle(owned, rec.ID, *out.Task)
			return callOutcome{Task: rec}, err
		case wire.ResultTypeComplete:
			rec, err = t.apply(rec.ID, model.Snapshot{Status: model.StatusCompleted, Result: out.Result, IsError: out.IsError})
			return callOutcome{Task: rec}, err
		}
		// input_required before any task exists.
		if round+1 >= maxInputRounds {
			failed, err := t.abandonCall(rec.ID, fmt.Errorf("the server asked for input %d times; giving up", maxInputRounds))
			return callOutcome{Task: failed}, err
		}
		again := askedAgain(out.InputRequests, answers)
		if up, ok := covering(out.InputRequests, upfront); ok && len(again) == 0 {
			answers, state = up, out.RequestState
			continue
		}
		rec, err = t.keep(ctx, rec.ID, out, upfront)
		return callOutcome{Task: rec, NeedsInput: err == nil, Again: again}, err
	}
}

// own is ctx detached from its caller's end (its values, the actor, kept)
// and ended by the owner's instead.
func (t *tracker) own(ctx context.Context) (context.Context, func()) {
	owned, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(t.life, cancel)
	return owned, func() { stop(); cancel() }
}

// askedAgain lists the keys of requests that were answered in the round
// before: the server did not take those answers.
func askedAgain(requests map[string]model.InputRequest, given map[string]json.RawMessage) []string {
	var again []string
	for k := range requests {
		if _, ok := given[k]; ok {
			again = append(again, k)
		}
	}
	slices.Sort(again)
	return again
}

// covering returns the answers for every key of the requests, if all are
// there.
func covering(requests map[string]model.InputRequest, answers map[string]json.RawMessage) (map[string]json.RawMessage, bool) {
	out := make(map[string]json.RawMessage, len(requests))
	for k := range requests {
		a, ok := answers[k]
		if !ok {
			return nil, false
		}
		out[k] = a
	}
	return out, true
}

// keep commits a call that needs input before its task exists: the
// requests and the server's requestState are kept, and answers given up
// front that fit a request count as given.
func (t *tracker) keep(ctx context.Context, id string, out *wire.CallOutcome, upfront map[string]json.RawMessage) (*model.Task, error) {
	return t.store.Update(id, func(r *model.Task) (bool, error) {
		msg := "the server needs input before it starts the task"
		if err := r.MoveTo(model.StatusInputRequired, msg, t.now()); err != nil {
			return false, err
		}
		r.StatusMessage = msg
		r.InputRequests = out.InputRequests
		r.RequestState = out.RequestState
		r.AnsweredKeys, r.PendingAnswers = nil, nil
		for k, req := range out.InputRequests {
			if a, ok := upfront[k]; ok && model.ValidateAnswer(req, a) == nil {
				r.PendingAnswers = orEmpty(r.PendingAnswers)
				r.PendingAnswers[k] = wire.Compact(a)
				r.MarkAnswered([]string{k}, t.now())
			}
		}
		if len(r.AnsweredKeys) > 0 {
			r.Act = &model.Act{Kind: model.ActAnswer, Actor: actorOf(ctx), Keys: slices.Clone(r.AnsweredKeys)}
		}
		return true, nil
	})
}

func orEmpty(m map[string]json.RawMessage) map[string]json.RawMessage {
	if m == nil {
		return map[string]json.RawMessage{}
	}
	return m
}

// Continue answers a call that NeedsInput. Answers are checked like
// Answer's and committed; once every requested key has one, the record
// goes back to calling and the next tools/call carries them with the
// server's requestState.
func (t *tracker) Continue(ctx context.Context, id string, answers map[string]json.RawMessage) (callOutcome, error) {
	unlock := t.tasks.lock(id)
	defer func() {
		if unlock != nil {
			unlock()
		}
	}()
	rec, err := t.store.Get(id)
	if err != nil {
		return callOutcome{}, err
	}
	if !rec.NeedsInput() {
		return callOutcome{Task: rec}, &stateError{Task: rec, Want: "it is not a call waiting for input before its start"}
	}
	if answers, err = admitAnswers(ctx, rec, answers); err != nil {
		return callOutcome{Task: rec}, err
	}
	if len(answers) > 0 {
		since := rec.WaitingSince()
		if rec, err = t.store.Update(id, t.claimAnswers(ctx, answers)); err != nil {
			return callOutcome{}, err
		}
		t.answered(rec, since)
	}
	if len(rec.PendingInputs()) > 0 {
		return callOutcome{Task: rec, NeedsInput: true}, nil
	}
	sess, err := t.session(ctx, rec.Server)
	if err != nil {
		return callOutcome{Task: rec, NeedsInput: true}, err // the answers stay, for another Continue
	}
	send, state := rec.PendingAnswers, rec.RequestState
	round := rec.InputRounds()
	maker, err := t.owner.maker()
	if err != nil {
		return callOutcome{Task: rec, NeedsInput: true}, err // the answers stay, for another Continue
	}
	rec, err = t.store.Update(id, func(r *model.Task) (bool, error) {
		if err := r.MoveTo(model.StatusCalling, "answers sent with the call", t.now()); err != nil {
			return false, err
		}
		r.Engine = maker // calling again, from this engine
		r.StatusMessage = ""
		r.InputRequests, r.AnsweredKeys, r.PendingAnswers, r.RequestState = nil, nil, nil, ""
		return true, nil
	})
	if err != nil {
		return callOutcome{}, err
	}
	// Back to calling, the record refuses another Continue or an Answer,
	// and no poll takes it: the lock may go, as it must before the
	// handle's first poll takes it again.
	unlock()
	unlock = nil
	return t.rounds(ctx, sess, rec, round, send, state, nil)
}

// handle stores a task handle. A CreateTaskResult carries no payload, so
// a seed whose status has one (a result, an error, input requests) is
// fetched at once with tasks/get; one that has ended is stored open until
// then, as stored ended its payload would be lost for good. Working and
// cancelled have no payload (spec §4): the seed is all there is.
func (t *tracker) handle(ctx context.Context, id string, snap model.Snapshot) (*model.Task, error) {
	seed := snap.Status
	if seed == model.StatusWorking || seed == model.StatusCancelled {
		rec, err := t.apply(id, snap)
		return rec, handleLost(id, snap.TaskID, err)
	}
	if seed.Terminal() {
		snap.Status = model.StatusWorking
		snap.StatusMessage = fmt.Sprintf("the server reports the task %s; fetching its outcome", seed)
	}
	if _, err := t.apply(id, snap); err != nil {
		return nil, handleLost(id, snap.TaskID, err)
	}
	res, err := t.Poll(ctx, id) // on failure the record stays open, for the next poll
	if errors.Is(err, store.ErrFenced) || (err != nil && ctx.Err() != nil) {
		// Another engine claimed it meanwhile, or the owner is closing:
		// the handle is committed all the same, and the next poll fetches the
		// outcome.
		return t.store.Get(id)
	}
	return res.Task, err
}

// refusedCall tells a call the server refused outright: it ended failed
// before any task was created.
func refusedCall(rec *model.Task) bool {
	return rec.Status == model.StatusFailed && rec.TaskID == ""
}

// keyHolder returns the task an idempotency key already names, if it is
// the same call. A call the server refused outright (no task was ever
// created) releases its key, so the corrected call can be made.
func (t *tracker) keyHolder(server model.ServerRef, tool string, args json.RawMessage, key string) (*model.Task, error) {
	existing, err := t.store.ByKey(key)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if refusedCall(existing) {
		return nil, t.releaseKey(existing.ID)
	}
	if existing.ArgsHash != model.ArgsHash(server, tool, args) {
		return nil, &keyConflictError{Key: key, Existing: existing}
	}
	return existing, nil
}

// releaseKey takes the key off a refused call's record, which stays on
// record without it; the store checks that it is still a refusal.
func (t *tracker) releaseKey(id string) error {
	_, err := t.store.ReleaseKey(id, refusedCall)
	if errors.Is(err, store.ErrNotFound) {
		return nil // forgotten meanwhile: the key is free
	}
	return err
}

// callFailed settles an intent whose tools/call got no usable answer.
func (t *tracker) callFailed(id string, sess *mcpclient.Session, cause error) (*model.Task, error) {
	var te *mcpclient.TransportError
	isTransport := errors.As(cause, &te)
	if isTransport && !te.Transient {
		t.pool.Drop(sess) // broken for good: the next use reconnects
	}
	switch {
	case isTransport && errors.As(cause, new(*mcpclient.RedirectError)):
		// The server answered, with a redirect that was not followed.
		rec, err := t.settle(id, model.StatusFailed, "the server answered with a redirect; nothing was started", cause, nil)
		return rec, errors.Join(cause, err)
	case isTransport && errors.Is(cause, syscall.ECONNREFUSED):
		// The connection was refused: the request never left.
		rec, err := t.settle(id, model.StatusFailed, "server unreachable; nothing was started", cause, nil)
		return rec, errors.Join(cause, err)
	case isTransport || errors.Is(cause, context.Canceled) || errors.Is(cause, context.DeadlineExceeded):
		rec, err := t.settle(id, model.StatusOrphaned, "the call was sent but no handle came back; the server may have started it", cause, nil)
		return rec, errors.Join(cause, err)
	case errors.Is(cause, wire.ErrInvalid):
		// A success answer that cannot be read may well be a task handle.
		rec, err := t.settle(id, model.StatusOrphaned, "the server's answer to the call could not be read; the server may have started it", cause, nil)
		return rec, errors.Join(cause, err)
	default:
		// The server answered with an error: nothing runs there.
		var rpcErr *model.RPCError
		var se *mcpclient.ServerError
		if errors.As(cause, &se) {
			rpcErr = &model.RPCError{Code: se.Code, Message: se.Message, Data: se.Data}
		}
		rec, err := t.settle(id, model.StatusFailed, "the server refused the call", cause, rpcErr)
		return rec, errors.Join(cause, err)
	}
}

// abandonCall ends an intent whose server kept asking for input.
func (t *tracker) abandonCall(id string, cause error) (*model.Task, error) {
	rec, err := t.settle(id, model.StatusFailed, "the server needed input before starting; none was given", cause, nil)
	return rec, errors.Join(cause, err)
}

func (t *tracker) settle(id string, to model.Status, msg string, cause error, rpcErr *model.RPCError) (*model.Task, error) {
	return t.store.Update(id, func(r *model.Task) (bool, error) {
		if err := r.MoveTo(to, msg, t.now()); err != nil {
			return false, err
		}
		r.StatusMessage = msg
		r.LocalError = mcpclient.RedactedLine(cause.Error())
		r.Error = rpcErr
		return true, nil
	})
}

// polledWrite writes the server's word on a task through its owner,
// fenced on a shared store: an engine that lost the claim cannot
// overwrite the one that took it, whichever path (poll, push, cancel,
// answer) brought the word; that write is refused with store.ErrFenced.
func (t *tracker) polledWrite(id string, fn func(t *model.Task) (bool, error)) (*model.Task, error) {
	return t.owner.write(id, fn)
}

// apply folds a call's own answer into its stored intent, which no poll
// can have written before, though another engine may have orphaned it
// meanwhile (see model.Task.ApplyCallAnswer).
func (t *tracker) apply(id string, snap model.Snapshot) (*model.Task, error) {
	return t.store.Update(id, func(r *model.Task) (bool, error) {
		return r.ApplyCallAnswer(snap, t.now())
	})
}

// session returns a connected session. Connecting is bounded by the
// request timeout like any request: a server that accepts connections but
// never answers fails the step (and shows the error) instead of holding it.
// The session outlives ctx: go-sdk detaches it from the connect context.
func (t *tracker) session(ctx context.Context, ref model.ServerRef) (*mcpclient.Session, error) {
	if sess, ok := t.pool.Connected(ref); ok {
		return sess, nil
	}
	cctx, cancel := context.WithTimeout(ctx, t.requestTimeout)
	defer cancel()
	return t.pool.Session(cctx, ref)
}

// pollResult is the outcome of one poll step.
type pollResult struct {
	Task    *model.Task
	Changed bool          // the record changed (and was written)
	Next    time.Duration // delay before the next poll; 0 when polling is over
	Err     error         // this poll's failure (the task keeps its state)
	Errors  int           // failed polls in a row, this one included
	// Unasked: its server was not asked (nothing to poll, or PollUnless's
	// elsewhere); Task is the record as stored.
	Unasked bool
}

// Poll runs one step for a task: one tasks/get, the answer applied and
// written if anything changed, and the delay before the next step. The
// error return is for local failures (store); server trouble is in Err.
func (t *tracker) Poll(ctx context.Context, id string) (pollResult, error) {
	return t.PollUnless(ctx, id, nil)
}

// PollUnless is Poll, except that a task whose record (read under its
// lock) elsewhere says another process watches is left Unasked: the one
// read serves both the check and the poll.
func (t *tracker) PollUnless(ctx context.Context, id string, elsewhere func(*model.Task) bool) (pollResult, error) {
	defer t.tasks.lock(id)()
	rec, err := t.store.Get(id)
	if err != nil {
		return pollResult{}, err
	}
	if elsewhere != nil && rec.Pollable() && elsewhere(rec) {
		return pollResult{Task: rec, Unasked: true}, nil
	}
	return t.pollRecord(ctx, id, rec)
}

func (t *tracker) poll(ctx context.Context, id string) (pollResult, error) {
	rec, err := t.store.Get(id)
	if err != nil {
		return pollResult{}, err
	}
	return t.pollRecord(ctx, id, rec)
}

// pollRecord polls task id, whose record rec was just read under its lock.
func (t *tracker) pollRecord(ctx context.Context, id string, rec *model.Task) (pollResult, error) {
	if !rec.Pollable() {
		t.forgetPoll(id)
		return pollResult{Task: rec, Unasked: true}, nil
	}
	if t.obs == nil && t.spans == nil && t.servers == nil {
		return t.ask(ctx, id, rec)
	}
	start := time.Now()
	sctx, op := t.spans.Start(ctx, tracing.OpPoll, rec, ServerLabel(rec.Server))
	res, err := t.ask(sctx, id, rec)
	op.End(res.Task, cmp.Or(err, res.Err))
	if err == nil {
		t.servers.polled(ctx, rec.Server, res.Err)
		if t.obs != nil {
			t.obs.Polled(ServerLabel(rec.Server), time.Since(start), causeOf(ctx, res.Err))
		}
	}
	return res, err
}

// ask is one poll of the pollable rec: its pending answers re-sent, then
// tasks/get.
func (t *tracker) ask(ctx context.Context, id string, rec *model.Task) (pollResult, error) {
	sess, err := t.session(ctx, rec.Server)
	if err != nil {
		return t.requestFailed(ctx, rec, nil, err)
	}
	// A re-send that fails does not stop the poll: the task's state is
	// asked for all the same (an answer refused is dropped by now).
	var sendErr error
	if len(rec.PendingAnswers) > 0 && !t.mayBeSending(rec) {
		if rec, sendErr = t.flushAnswers(ctx, sess, rec); rec == nil {
			return pollResult{}, sendErr // the store failed
		}
	}
	cctx, cancel := context.WithTimeout(ctx, t.requestTimeout)
	sent := t.now()
	snap, err := sess.GetTask(cctx, rec.TaskID)
	cancel()
	switch {
	case errors.Is(err, mcpclient.ErrTaskUnknown):
		why := whyUnknown
		if gone := (*mcpclient.TaskGoneError)(nil); errors.As(err, &gone) {
			why = gone.Why // the server's session held it (2025-11-25)
		}
		rec, err := t.markUnknown(id, why)
		return pollResult{Task: rec, Changed: true}, err
	case errors.Is(err, mcpclient.ErrNoTasks):
		rec, err := t.markUnknown(id, whyNoTasks)
		return pollResult{Task: rec, Changed: true}, err
	case err != nil:
		return t.requestFailed(ctx, rec, sess, err)
	}
	return t.fold(id, rec, *snap, sendErr, sent)
}

// Pushed applies a task's state the server pushed exactly as a poll's
// answer: the same checks, a write only on change, the same next delay.
func (t *tracker) Pushed(id string, snap model.Snapshot) (pollResult, error) {
	defer t.tasks.lock(id)()
	rec, err := t.store.Get(id)
	if err != nil {
		return pollResult{}, err
	}
	if !rec.Pollable() {
		t.forgetPoll(id)
		return pollResult{Task: rec}, nil
	}
	_, op := t.spans.Start(context.Background(), tracing.OpPush, rec, ServerLabel(rec.Server))
	res, err := t.fold(id, rec, snap, nil, t.now())
	op.End(res.Task, err)
	return res, err
}

// fold applies a server's answer about a task to its record rec (read
// under the task's lock), writing only on change. sendErr is a failed
// re-send of answers, which this step reports; asked is when the server
// was asked (the next poll is due an interval after it).
func (t *tracker) fold(id string, rec *model.Task, snap model.Snapshot, sendErr error, asked time.Time) (pollResult, error) {
	// Most polls change nothing: find out on the record in hand (this
	// poll's own copy), so that only a change costs the store a
	// read-modify-write. A poll that changes nothing moves only its
	// LastPolledAt, which is not stored.
	changed, err := rec.Apply(snap, t.now())
	if err != nil {
		// A server that contradicts itself, or answers about another
		// task, fails the poll; it is not a new truth.
		return t.pollFailed(rec, nil, fmt.Errorf("server reported %w", err)), nil
	}
	// wrote is the stored record's own answer: it may already say what
	// rec did not (another engine's write came first), and then nothing
	// is written and nothing is refused.
	updated, wrote := rec, false
	if changed {
		updated, err = t.polledWrite(id, func(r *model.Task) (bool, error) {
			var err error
			wrote, err = r.Apply(snap, t.now())
			return wrote, err
		})
		var te *model.TransitionError
		if errors.As(err, &te) {
			// The stored record moved meanwhile (the operator cancelled,
			// say) where the answer cannot follow; rec holds the answer
			// applied, so the record is reported as it is stored.
			if rec, err = t.store.Get(id); err != nil {
				return pollResult{}, err
			}
			return t.pollFailed(rec, nil, fmt.Errorf("server reported %w", te)), nil
		}
		if err != nil {
			return pollResult{}, err
		}
	}
	// Any change (a new statusMessage too) restarts the interval: a task
	// that moves is likely to move again soon.
	next, errs := t.schedule(updated, changed, sendErr, asked)
	return pollResult{Task: updated, Changed: wrote, Next: next, Err: sendErr, Errors: errs}, nil
}

const (
	whyUnknown = "the server no longer knows this task (expired, or lost when the server restarted)"
	whyNoTasks = "the server no longer speaks the tasks extension (tasks/* are unknown methods there); its outcome cannot be fetched"
)

// markUnknown ends a task its server cannot tell about any more.
func (t *tracker) markUnknown(id, why string) (*model.Task, error) {
	t.forgetPoll(id)
	return t.polledWrite(id, func(r *model.Task) (bool, error) {
		if r.Status.Terminal() {
			return false, nil
		}
		r.StatusMessage = why
		return true, r.MarkUnknown(why, t.now())
	})
}

// mayBeSending tells whether rec's pending answers may be on their way
// from another engine on a shared store (one that took them from its
// operator and has not heard back yet): re-sent now, they would reach the
// server twice. Past two request timeouts that send is over either way,
// and the poll re-sends what is still pending. With one owner its task
// lock already keeps a poll from overlapping its own send.
func (t *tracker) mayBeSending(rec *model.Task) bool {
	if t.owner.alone() {
		return false
	}
	cutoff := t.now().Add(-2 * t.requestTimeout)
	for _, a := range rec.Answers {
		if _, pending := rec.PendingAnswers[a.Key]; pending && a.At.After(cutoff) {
			return true
		}
	}
	return false
}

// requestFailed files a poll whose request failed. One cut off by its
// caller (an agent that hung up on the proxy, an engine closing) is no
// poll: the task keeps its schedule and shows no error.
func (t *tracker) requestFailed(ctx context.Context, rec *model.Task, sess *mcpclient.Session, err error) (pollResult, error) {
	if ctx.Err() != nil {
		return pollResult{Task: rec}, ctx.Err()
	}
	return t.pollFailed(rec, sess, err), nil
}

func (t *tracker) pollFailed(rec *model.Task, sess *mcpclient.Session, err error) pollResult {
	var te *mcpclient.TransportError
	if sess != nil && errors.As(err, &te) && !te.Transient {
		// go-sdk failed the session for good; a transient rejection (a
		// 503, a refused or dropped connection) leaves it usable, and a
		// reconnect would only add a request to a struggling server.
		t.pool.Drop(sess)
	}
	t.log.Debug("poll failed", "record", rec.ID, "server", ServerLabel(rec.Server), "err", err, t.spans.LogAttr(rec.ID))
	next, errs := t.schedule(rec, false, err, t.now())
	return pollResult{Task: rec, Next: next, Err: err, Errors: errs}
}

// schedule runs the poll policy for a task and remembers the outcome: the
// delay before the next poll and the failed polls in a row. The delay
// counts from asked, when this poll's request went out, so that polls
// reach the server the interval apart it asked for, not the interval plus
// a round trip (an answer slower than the interval: the next poll at once).
func (t *tracker) schedule(rec *model.Task, changed bool, pollErr error, asked time.Time) (time.Duration, int) {
	if !rec.Status.Pollable() {
		t.forgetPoll(rec.ID)
		return 0, 0
	}
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	ps := t.polls[rec.ID]
	if ps == nil {
		ps = &pollState{}
		t.polls[rec.ID] = ps
	}
	in := model.PollInput{
		Previous:   ps.base,
		ServerHint: rec.ServerPollInterval(),
		Changed:    changed,
		Now:        asked, // the delay counts from the request: so does the time left
		Deadline:   rec.Deadline(),
		Age:        now.Sub(rec.CreatedAt),
	}
	if pollErr != nil {
		ps.errors++
		in.Errors = ps.errors
		var te *mcpclient.TransportError
		if errors.As(pollErr, &te) {
			in.RetryAfter = te.RetryAfter
		}
	} else {
		ps.errors = 0
	}
	ps.lastErr = pollErr
	ps.lastPolled = now
	if t.obs != nil { // only metrics read it
		ps.server, ps.status, ps.waiting = ServerLabel(rec.Server), rec.Status, time.Time{}
		if rec.Status == model.StatusInputRequired && rec.WaitsForInput() {
			ps.waiting = rec.WaitingSince()
		}
	}
	ps.base = t.policy.Next(in)
	ps.next = asked.Add(t.policy.WithJitter(in, ps.base, rand.Float64()))
	return max(ps.next.Sub(now), time.Microsecond), ps.errors
}

func (t *tracker) forgetPoll(id string) {
	t.mu.Lock()
	delete(t.polls, id)
	t.mu.Unlock()
}

// pollStatus tells when a task was last polled, when it is due, and the
// last poll error, if any.
func (t *tracker) pollStatus(id string) pollStatus {
	t.mu.Lock()
	defer t.mu.Unlock()
	ps := t.polls[id]
	if ps == nil {
		return pollStatus{}
	}
	return pollStatus{LastPolled: ps.lastPolled, Next: ps.next, Errors: ps.errors, LastError: ps.lastErr}
}

// check refuses, before anything is written or sent, a call that the
// server's tool list rules out: an unknown tool or arguments its input
// schema refuses are a *mcpclient.CallError. A tool list that cannot be
// had leaves the check to the server.
func (t *tracker) check(ctx context.Context, sess *mcpclient.Session, tool string, args json.RawMessage) error {
	cctx, cancel := context.WithTimeout(ctx, t.requestTimeout)
	defer cancel()
	list, err := sess.Tools(cctx)
	if err != nil {
		// The error names the server; it is logged at debug level only, as
		// poll failures are.
		t.log.Debug("tools/list failed; the call goes out unchecked", "tool", tool, "err", err)
		return nil
	}
	return list.Check(tool, args)
}
