package demo

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/taskdeck/taskdeck/mcpclient/wire"
)

const (
	statusWorking       = "working"
	statusInputRequired = "input_required"
	statusCompleted     = "completed"
	statusFailed        = "failed"
	statusCancelled     = "cancelled"
)

// task is one entry of the table. All fields are guarded by table.mu.
type task struct {
	id            string
	status        string
	statusMessage string
	created       time.Time
	updated       time.Time
	expires       time.Time
	pollInterval  time.Duration

	// While input_required: the outstanding requests (wire form), the
	// answers received so far, and where to deliver them once complete.
	inputs  wire.InputRequestMap
	answers map[string]*mcp.ElicitResult
	deliver chan map[string]*mcp.ElicitResult

	result json.RawMessage
	err    *jsonrpc.Error
	cancel context.CancelFunc
}

func (t *task) terminal() bool {
	return t.status == statusCompleted || t.status == statusFailed || t.status == statusCancelled
}

// table is the in-memory task store. Tasks are deleted TTL after creation:
// lazily when looked up, and in a sweep whenever a task is created, so no
// janitor goroutine is needed. Each running task's context ends at its
// expiry too, so its goroutine never outlives it.
type table struct {
	ttl  time.Duration
	poll time.Duration

	mu     sync.Mutex
	tasks  map[string]*task
	closed bool
	root   context.Context
	stop   context.CancelFunc
	wg     sync.WaitGroup

	subs  map[*subscription]struct{} // live subscriptions/listen streams
	hooks []func(string, time.Time)  // Server.OnChange
}

var errClosed = errors.New("server is closed")

func newTable(ttl, poll time.Duration) *table {
	root, stop := context.WithCancel(context.Background())
	return &table{ttl: ttl, poll: poll, tasks: map[string]*task{}, root: root, stop: stop,
		subs: map[*subscription]struct{}{}}
}

// create registers a working task and returns it with the context its
// goroutine must run under (detached from any request, bounded by the
// TTL, cancelled by tasks/cancel and close). The caller must call done
// when that goroutine ends.
func (tb *table) create() (*task, context.Context, error) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	if tb.closed {
		return nil, nil, errClosed
	}
	now := time.Now()
	for id, t := range tb.tasks {
		if !now.Before(t.expires) {
			delete(tb.tasks, id)
		}
	}
	t := &task{
		id:           rand.Text(), // 128 random bits, base32
		status:       statusWorking,
		created:      now,
		updated:      now,
		expires:      now.Add(tb.ttl),
		pollInterval: tb.poll,
	}
	ctx, cancel := context.WithDeadline(tb.root, t.expires)
	t.cancel = cancel
	tb.tasks[t.id] = t
	tb.wg.Add(1)
	return t, ctx, nil
}

func (tb *table) done(t *task) {
	tb.mu.Lock()
	t.cancel()
	tb.mu.Unlock()
	tb.wg.Done()
}

// close cancels every task and waits for their goroutines.
func (tb *table) close() {
	tb.mu.Lock()
	tb.closed = true
	tb.stop()
	tb.mu.Unlock()
	tb.wg.Wait()
}

// lookup returns a live task; the caller holds tb.mu.
func (tb *table) lookup(id string) (*task, bool) {
	t, ok := tb.tasks[id]
	if ok && !time.Now().Before(t.expires) {
		delete(tb.tasks, id)
		return nil, false
	}
	return t, ok
}

// setLocked changes the status; see changedLocked.
func (tb *table) setLocked(t *task, status string) {
	t.status = status
	tb.changedLocked(t)
}

// changedLocked stamps lastUpdatedAt after a change of a task's tasks/get
// view, runs the OnChange hooks and queues the new view for its
// subscribers: no one can see the change before the hooks have run. The
// caller holds tb.mu.
func (tb *table) changedLocked(t *task) {
	t.updated = time.Now()
	for _, h := range tb.hooks {
		h(t.id, t.updated)
	}
	if len(tb.subs) > 0 {
		tb.pushLocked(t)
	}
}

// get returns the tasks/get view of a task.
func (tb *table) get(id string) (*wire.GetTaskResult, error) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	t, ok := tb.lookup(id)
	if !ok {
		return nil, wire.ErrTaskNotFound()
	}
	return &wire.GetTaskResult{ResultType: wire.ResultTypeComplete, DetailedTask: tb.detailLocked(t)}, nil
}

// detailLocked is the DetailedTask of tasks/get and notifications/tasks;
// the caller holds tb.mu.
func (tb *table) detailLocked(t *task) wire.DetailedTask {
	d := wire.DetailedTask{Task: tb.head(t)}
	switch t.status {
	case statusInputRequired:
		d.InputRequests = wire.InputRequestMap{} // only what is still unanswered
		for k, r := range t.inputs {
			if t.answers[k] == nil {
				d.InputRequests[k] = r
			}
		}
	case statusCompleted:
		d.Result = t.result
	case statusFailed:
		d.Error = wire.RPCError(t.err)
	}
	return d
}

// head is the Task object; the caller holds tb.mu.
func (tb *table) head(t *task) wire.Task {
	ttl, poll := wire.Ms(tb.ttl.Milliseconds()), wire.Ms(max(t.pollInterval.Milliseconds(), 1))
	return wire.Task{
		TaskID:         t.id,
		Status:         t.status,
		StatusMessage:  t.statusMessage,
		CreatedAt:      wire.NowString(t.created),
		LastUpdatedAt:  wire.NowString(t.updated),
		TTLMs:          &ttl,
		PollIntervalMs: &poll,
	}
}

// snapshot is the Task object of a task, for CreateTaskResult.
func (tb *table) snapshot(t *task) wire.Task {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return tb.head(t)
}

// cancel marks a task cancelled and stops its goroutine. A terminal task
// is left as it is; cancelling it is acknowledged all the same.
func (tb *table) cancel(id string) error {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	t, ok := tb.lookup(id)
	if !ok {
		return wire.ErrTaskNotFound()
	}
	if t.terminal() {
		return nil
	}
	t.statusMessage = "cancelled by the client"
	t.inputs, t.answers, t.deliver = nil, nil, nil
	tb.setLocked(t, statusCancelled)
	t.cancel()
	return nil
}

// finish records how the tool ended, unless the task already ended
// (cancelled: a late result is dropped).
func (tb *table) finish(t *task, res mcp.Result, err error) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	if t.terminal() {
		return
	}
	t.inputs, t.answers, t.deliver = nil, nil, nil
	if err == nil {
		t.result, err = json.Marshal(res)
	}
	if err != nil {
		var jerr *jsonrpc.Error
		if !errors.As(err, &jerr) {
			jerr = &jsonrpc.Error{Code: wire.CodeInternal, Message: err.Error()}
		}
		t.err = jerr
		tb.setLocked(t, statusFailed)
		return
	}
	tb.setLocked(t, statusCompleted)
}

// progress sets the status message (and, if non-zero, the poll interval).
func (tb *table) progress(t *task, msg string, poll time.Duration) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	if t.terminal() {
		return
	}
	t.statusMessage = msg
	if poll > 0 {
		t.pollInterval = poll
	}
	tb.changedLocked(t)
}

// ask puts the task into input_required with the given requests and
// returns the channel that receives all their answers at once.
func (tb *table) ask(t *task, reqs map[string]*mcp.ElicitParams) (<-chan map[string]*mcp.ElicitResult, error) {
	m := mcp.InputRequestMap{}
	for k, p := range reqs {
		m[k] = p
	}
	inputs, err := wire.InputRequests(m)
	if err != nil {
		return nil, err
	}
	tb.mu.Lock()
	defer tb.mu.Unlock()
	if t.terminal() {
		return nil, context.Canceled
	}
	t.inputs = inputs
	t.answers = map[string]*mcp.ElicitResult{}
	t.deliver = make(chan map[string]*mcp.ElicitResult, 1)
	tb.setLocked(t, statusInputRequired)
	return t.deliver, nil
}

// update takes the answers to outstanding, unanswered keys and ignores
// every other key. A malformed answer to an outstanding key rejects the
// whole update. Once every outstanding key is answered the task is working
// again and the tool gets the answers.
func (tb *table) update(id string, responses map[string]json.RawMessage) error {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	t, ok := tb.lookup(id)
	if !ok {
		return wire.ErrTaskNotFound()
	}
	if t.status != statusInputRequired {
		return nil
	}
	taken := map[string]*mcp.ElicitResult{}
	for _, k := range slices.Sorted(maps.Keys(responses)) {
		if _, outstanding := t.inputs[k]; !outstanding || t.answers[k] != nil {
			continue
		}
		var r mcp.ElicitResult
		if err := json.Unmarshal(responses[k], &r); err != nil {
			return invalidParams("inputResponses[%q]: %v", k, err)
		}
		switch r.Action {
		case "accept", "decline", "cancel":
		default:
			return invalidParams("inputResponses[%q]: action must be accept, decline or cancel", k)
		}
		taken[k] = &r
	}
	maps.Copy(t.answers, taken)
	if len(t.answers) < len(t.inputs) {
		if len(taken) > 0 { // the answered keys left inputRequests
			tb.changedLocked(t)
		}
		return nil
	}
	t.deliver <- t.answers // buffered, sent once per ask
	t.inputs, t.answers, t.deliver = nil, nil, nil
	tb.setLocked(t, statusWorking)
	return nil
}

func invalidParams(format string, args ...any) *jsonrpc.Error {
	return &jsonrpc.Error{Code: wire.CodeInvalidParams, Message: fmt.Sprintf(format, args...)}
}
