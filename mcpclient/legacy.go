package mcpclient

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskdeck/taskdeck/mcpclient/legacy"
	"github.com/taskdeck/taskdeck/mcpclient/wire"
	"github.com/taskdeck/taskdeck/model"
)

// DefaultLegacyTTL is the ttl taskdeck asks of a task on the 2025-11-25
// wire; the server may grant less.
const DefaultLegacyTTL = 24 * time.Hour

// askWait bounds how long a poll that finds a task input_required waits
// for the server's question to arrive on the tasks/result stream it has
// just opened: a question that comes later shows on the next poll.
const askWait = 2 * time.Second

// ErrQuestionGone is the error of an answer to a question whose
// elicitation/create request is no longer held (the session that carried it ended).
var ErrQuestionGone = errors.New("the session that carried this question is gone (taskdeck or the server restarted); taskdeck asks the server again, answer the question it repeats")

// TaskGoneError is ErrTaskUnknown with the reason the record keeps.
type TaskGoneError struct{ Why string }

func (e *TaskGoneError) Error() string        { return e.Why }
func (e *TaskGoneError) Is(target error) bool { return target == ErrTaskUnknown }

// WhySessionBound is why a task made on an earlier session is unknown to
// the current one: 2025-11-25 servers may bind tasks to their session.
const WhySessionBound = "the server binds tasks to the session that made them, and that session is gone (taskdeck or the server restarted); the server may still be running it"

// legacyTasks is what a 2025-11-25 session keeps about its tasks: the
// tasks/result requests in flight (one per task at most, ended with the
// session) and the elicitation/create requests they carried, held open
// until the operator answers.
type legacyTasks struct {
	ctx    context.Context // the session's life: bounds every tasks/result
	cancel context.CancelFunc
	cs     *mcp.ClientSession

	callsAsTasks bool // capabilities.tasks.requests.tools.call
	lists        bool // capabilities.tasks.list

	mu      sync.Mutex
	asks    map[string]map[string]*heldAsk // by task id, by input key
	fetches map[string]*resultFetch        // by task id
	created map[string]bool                // tasks this session made
	arrived chan struct{}                  // closed (and replaced) when an ask arrives
}

type heldAsk struct {
	params json.RawMessage
	reply  chan *mcp.ElicitResult // buffered: the answer never waits
}

type resultFetch struct {
	done chan struct{}
	raw  json.RawMessage
	err  error
}

func newLegacyTasks() *legacyTasks {
	ctx, cancel := context.WithCancel(context.Background())
	return &legacyTasks{ctx: ctx, cancel: cancel, asks: map[string]map[string]*heldAsk{},
		fetches: map[string]*resultFetch{}, created: map[string]bool{}, arrived: make(chan struct{})}
}

// elicit holds a server's elicitation/create for a task until the
// operator answers it (UpdateTask), the tasks/result that carried it
// ends, or the session does. One that names no task taskdeck is fetching
// is refused: there is no record to ask on.
func (l *legacyTasks) elicit(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	id := legacy.RelatedTask(req.Params.Meta)
	params, err := json.Marshal(req.Params)
	if err != nil {
		return nil, err
	}
	key := newKey()
	a := &heldAsk{params: params, reply: make(chan *mcp.ElicitResult, 1)}
	l.mu.Lock()
	if _, fetching := l.fetches[id]; id == "" || !fetching {
		l.mu.Unlock()
		return nil, &jsonrpc.Error{Code: wire.CodeInvalidParams, Message: "taskdeck answers elicitation/create only for a task whose tasks/result it awaits"}
	}
	if l.asks[id] == nil {
		l.asks[id] = map[string]*heldAsk{}
	}
	l.asks[id][key] = a
	close(l.arrived)
	l.arrived = make(chan struct{})
	l.mu.Unlock()
	select {
	case res := <-a.reply:
		if res == nil {
			return nil, &jsonrpc.Error{Code: wire.CodeInternal, Message: "the task ended before the operator answered"}
		}
		return res, nil
	case <-ctx.Done():
	case <-l.ctx.Done():
	}
	l.mu.Lock()
	delete(l.asks[id], key)
	l.mu.Unlock()
	return nil, errors.New("taskdeck's session ended before the operator answered")
}

func newKey() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return "elicit-" + hex.EncodeToString(b)
}

// fetch starts tasks/result for a task unless one is in flight, and
// returns it. One that failed on the way (not a server's answer) is
// forgotten when it ends, so the next poll asks again.
func (l *legacyTasks) fetch(id string) *resultFetch {
	l.mu.Lock()
	defer l.mu.Unlock()
	if f := l.fetches[id]; f != nil {
		return f
	}
	f := &resultFetch{done: make(chan struct{})}
	l.fetches[id] = f
	go func() {
		res, err := mcp.CallCustomMethod[*legacy.IDParams, *legacy.Raw](l.ctx, l.cs, legacy.MethodResult, &legacy.IDParams{TaskID: id})
		if err == nil {
			f.raw = res.JSON
		}
		f.err = err
		l.mu.Lock()
		for key, a := range l.asks[id] {
			a.reply <- nil // the server has its answer by now, or never will
			delete(l.asks[id], key)
		}
		delete(l.asks, id)
		var werr *jsonrpc.Error
		if err != nil && !errors.As(err, &werr) {
			delete(l.fetches, id)
		}
		close(f.done)
		l.mu.Unlock()
	}()
	return f
}

// done forgets a task's fetched result once a poll has it.
func (l *legacyTasks) done(id string, f *resultFetch) {
	l.mu.Lock()
	if l.fetches[id] == f {
		delete(l.fetches, id)
	}
	delete(l.created, id)
	l.mu.Unlock()
}

// requests are the questions held for a task, as input requests.
func (l *legacyTasks) requests(id string) (map[string]model.InputRequest, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.asks[id]) == 0 {
		return nil, l.arrived
	}
	out := make(map[string]model.InputRequest, len(l.asks[id]))
	for key, a := range l.asks[id] {
		out[key] = model.InputRequest{Method: "elicitation/create", Params: a.params}
	}
	return out, l.arrived
}

func (s *Session) legacyCall(ctx context.Context, tool string, args json.RawMessage) (*wire.CallOutcome, error) {
	l := s.legacy
	params := &mcp.CallToolParams{Name: tool, Arguments: args}
	if len(args) == 0 {
		params.Arguments = json.RawMessage("{}")
	}
	// Not alone (aloneTransport): on this wire a tools/call on a fresh,
	// unkept connection made TestCrashStormLegacy's later calls fail their
	// first request with "unexpected EOF" in 3 of 3 storms; the cause is
	// not found, so this wire keeps its pooled connection.
	info := &callInfo{}
	if list, _, err := s.tools.get(ctx, s, false); err == nil && l.callsAsTasks && legacy.TaskSupport(list.Sent(tool)) != "forbidden" {
		info.task = &legacy.TaskParams{TTL: DefaultLegacyTTL.Milliseconds()}
	}
	if _, err := s.cs.CallTool(withCallInfo(ctx, info), params); err != nil {
		return nil, classify(s.ref.String(), err, false, info)
	}
	raw := info.result()
	if raw == nil {
		return nil, &TransportError{Server: s.ref.String(), Err: errors.New("tools/call result was not captured")}
	}
	out, err := legacy.DecodeCallResult(raw)
	if err == nil && out.Task != nil {
		l.mu.Lock()
		l.created[out.Task.TaskID] = true
		l.mu.Unlock()
	}
	return out, err
}

// legacyGet polls with tasks/get; a task that ended has its result (or
// error) fetched with tasks/result, and one that waits for input has
// tasks/result opened, which is where the server asks its questions.
func (s *Session) legacyGet(ctx context.Context, taskID string) (*model.Snapshot, error) {
	l := s.legacy
	info := &callInfo{taskID: taskID}
	res, err := mcp.CallCustomMethod[*legacy.IDParams, *legacy.Raw](withCallInfo(ctx, info), s.cs, legacy.MethodGet, &legacy.IDParams{TaskID: taskID})
	if err != nil {
		err = classify(s.ref.String(), err, true, info)
		l.mu.Lock()
		mine := l.created[taskID]
		l.mu.Unlock()
		if errors.Is(err, ErrTaskUnknown) && !mine {
			return nil, &TaskGoneError{Why: WhySessionBound}
		}
		return nil, err
	}
	snap, err := legacy.DecodeTask(res.JSON)
	if err != nil {
		return nil, err
	}
	if snap.TaskID != taskID {
		return nil, fmt.Errorf("%w: tasks/get for one task answered about another", wire.ErrInvalid)
	}
	switch snap.Status {
	case model.StatusInputRequired:
		f := l.fetch(taskID)
		wait := time.NewTimer(askWait)
		defer wait.Stop()
		// Until a question arrives, the record keeps those it holds (asked
		// on a session that is gone, they are answered with ErrQuestionGone).
		snap.InputsUnheard = true
		for {
			reqs, arrived := l.requests(taskID)
			if reqs != nil {
				snap.InputRequests = reqs
				return snap, nil
			}
			select {
			case <-arrived:
			case <-f.done:
				return snap, nil
			case <-wait.C:
				return snap, nil
			case <-ctx.Done():
				return snap, nil
			}
		}
	case model.StatusCompleted, model.StatusFailed:
		f := l.fetch(taskID)
		select {
		case <-f.done:
		case <-ctx.Done():
			return nil, classify(s.ref.String(), fmt.Errorf("%s: %w", legacy.MethodResult, ctx.Err()), true, nil)
		}
		if err := s.legacyResult(snap, f); err != nil {
			return nil, err
		}
		l.done(taskID, f)
	}
	return snap, nil
}

// legacyResult puts what tasks/result answered on an ended task's snapshot.
func (s *Session) legacyResult(snap *model.Snapshot, f *resultFetch) error {
	var werr *jsonrpc.Error
	switch {
	case f.err != nil && snap.Status == model.StatusFailed && errors.As(f.err, &werr):
		snap.Error = &model.RPCError{Code: werr.Code, Message: RedactedLine(werr.Message), Data: werr.Data}
		return nil
	case f.err != nil:
		return classify(s.ref.String(), f.err, true, nil)
	case snap.Status == model.StatusFailed:
		// What tasks/result holds of a failed task (a tool error, often)
		// is kept whole as the error's data.
		snap.Error = &model.RPCError{Code: wire.CodeInternal, Message: cmp.Or(snap.StatusMessage, "task failed"), Data: wire.Compact(f.raw)}
		return nil
	}
	var err error
	snap.Result, snap.IsError, err = legacy.DecodeResult(f.raw)
	return err
}

// legacyUpdate answers the questions held for a task. An answer to a
// question no longer held answers none of them: tasks/result is opened
// again for the server to repeat it.
func (s *Session) legacyUpdate(taskID string, answers map[string]json.RawMessage) error {
	l := s.legacy
	replies := make(map[string]*mcp.ElicitResult, len(answers))
	for key, raw := range answers {
		res := &mcp.ElicitResult{}
		if err := json.Unmarshal(raw, res); err != nil {
			return fmt.Errorf("answer %s is not an elicitation result: %w", key, err)
		}
		replies[key] = res
	}
	l.mu.Lock()
	for key := range replies {
		if l.asks[taskID][key] == nil {
			l.mu.Unlock()
			l.fetch(taskID)
			return ErrQuestionGone
		}
	}
	for key, res := range replies {
		l.asks[taskID][key].reply <- res
		delete(l.asks[taskID], key)
	}
	l.mu.Unlock()
	return nil
}

func (s *Session) legacyCancel(ctx context.Context, taskID string) error {
	info := &callInfo{taskID: taskID}
	_, err := mcp.CallCustomMethod[*legacy.IDParams, *legacy.Raw](withCallInfo(ctx, info), s.cs, legacy.MethodCancel, &legacy.IDParams{TaskID: taskID})
	return classify(s.ref.String(), err, true, info)
}

// MaxListPages and MaxListTasks bound one tasks/list: a server whose
// cursor never ends, or that lists more tasks than these, is not
// followed past them (an error: a partial list would find nothing sure).
const (
	MaxListPages = 100
	MaxListTasks = 10000
)

// ErrNoList: the session cannot list the server's tasks (it does not
// speak 2025-11-25, or the server does not offer tasks/list).
var ErrNoList = errors.New("the server does not offer tasks/list")

// ListTasks lists the tasks the server holds for this session's caller
// (tasks/list, every page up to MaxListPages and MaxListTasks tasks; a
// cursor repeated is an error), as snapshots without results.
func (s *Session) ListTasks(ctx context.Context) ([]*model.Snapshot, error) {
	if s.legacy == nil || !s.legacy.lists {
		return nil, ErrNoList
	}
	var out []*model.Snapshot
	seen := map[string]bool{}
	cursor := ""
	for range MaxListPages {
		res, err := mcp.CallCustomMethod[*legacy.ListParams, *legacy.Raw](ctx, s.cs, legacy.MethodList, &legacy.ListParams{Cursor: cursor})
		if err != nil {
			return nil, classify(s.ref.String(), err, true, nil)
		}
		tasks, next, err := legacy.DecodeList(res.JSON)
		if err != nil {
			return nil, err
		}
		out = append(out, tasks...)
		if len(out) > MaxListTasks {
			return nil, fmt.Errorf("%w: tasks/list listed more than %d tasks", wire.ErrInvalid, MaxListTasks)
		}
		if next == "" {
			return out, nil
		}
		if seen[next] {
			return nil, fmt.Errorf("%w: tasks/list repeated the cursor %.40q", wire.ErrInvalid, next)
		}
		seen[next], cursor = true, next
	}
	return nil, fmt.Errorf("%w: tasks/list ran past %d pages", wire.ErrInvalid, MaxListPages)
}
