package proxy

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/mcpclient/config"
	"github.com/taskdeck/taskdeck/mcpclient/legacy"
	"github.com/taskdeck/taskdeck/mcpclient/wire"
	"github.com/taskdeck/taskdeck/model"
)

// endpoint is one configured server as the agents see it.
type endpoint struct {
	p   *Proxy
	cfg config.ServerConfig
	who principal // who is asking
	// legacy is the session of an agent that speaks 2025-11-25 (see
	// legacy.go); nil for 2026-07-28.
	legacy *legacySession
}

func (ep *endpoint) ref() model.ServerRef { return model.ServerRef{Name: ep.cfg.Name} }

// statePrefix marks the requestState the proxy hands an agent for a call
// that needs input before its task exists: the rest is the record's id.
const statePrefix = "taskdeck:"

type callParams struct {
	Meta           map[string]any             `json:"_meta"`
	Name           string                     `json:"name"`
	Arguments      json.RawMessage            `json:"arguments,omitempty"`
	InputResponses map[string]json.RawMessage `json:"inputResponses,omitempty"`
	RequestState   string                     `json:"requestState,omitempty"`
	// Task asks a 2025-11-25 server for a task (the newer revision has
	// no such opt-in and ignores it).
	Task *legacy.TaskParams `json:"task,omitempty"`
}

// call makes the agent's tools/call durable. An agent that declares the
// tasks extension gets the handle (its taskId is the record's id) once
// the Deck has committed it; any other agent is held until the end.
func (ep *endpoint) call(ctx context.Context, req *request) *response {
	var cp callParams
	if err := json.Unmarshal(req.Params, &cp); err != nil {
		return fail(req.ID, jsonrpc.CodeInvalidParams, `tools/call params must be an object of "name", "arguments" (an object) and "_meta" (an object)`)
	}
	if cp.Name == "" {
		return fail(req.ID, jsonrpc.CodeInvalidParams, `tools/call needs params with the tool's "name"`)
	}
	if bad := ep.checkParamHeaders(ctx, req.ID, cp.Name, cp.Arguments); bad != nil {
		return bad
	}
	if string(cp.Arguments) == "null" {
		cp.Arguments = nil // what a client with no arguments may send: none
	}
	m := metaOf(cp.Meta)
	if ep.legacy != nil {
		// The 2025-11-25 agent's opt-in, and its name from initialize.
		m.Tasks, m.Agent = cp.Task != nil, ep.legacy.label
	}
	rp, bad := ep.repeatOf(ctx, req.ID, cp, m)
	if bad != nil {
		return bad
	}
	var res deck.CallResult
	var err error
	secret, hash := ep.p.newHandle()
	if rp.secret != "" {
		secret, hash = rp.secret, hashHandle(rp.secret)
	}
	if id, ok := strings.CutPrefix(cp.RequestState, statePrefix); ok {
		e, gerr := ep.record(ctx, id)
		if gerr != nil {
			return fail(req.ID, jsonrpc.CodeInvalidParams, "the requestState names no call of this server; call the tool again without it")
		}
		_, secret, _ = splitID(id)
		res, err = ep.p.opts.Deck.Continue(ctx, e.Task.ID, cp.InputResponses)
	} else {
		res, err = ep.launch(ctx, cp, m, rp, hash)
	}
	if err != nil {
		return callError(req.ID, res.Task, err)
	}
	rec := res.Task
	tid := ep.p.agentID(rec, ep.who.who.Name, secret)
	ep.p.log.Info("proxy: call", "server", ep.cfg.Name, "tool", cp.Name, "principal", ep.who.who.Name, "agent", m.Agent, "id", rec.ID, "status", rec.Status, "held", !m.Tasks, "repeat", res.Reused)
	if !m.Tasks {
		return ep.hold(ctx, req.ID, rec, m.Raw["progressToken"])
	}
	if ep.legacy != nil {
		return ep.legacyCreated(req.ID, rec, tid)
	}
	switch {
	case res.NeedsInput:
		return reply(req.ID, map[string]any{
			"resultType":    wire.ResultTypeInputRequired,
			"inputRequests": pending(rec),
			"requestState":  statePrefix + tid,
		})
	case rec.TaskID == "" && rec.Status == model.StatusCompleted:
		return reply(req.ID, complete(rec.Result))
	case rec.TaskID == "":
		return recordEnded(req.ID, rec)
	}
	t := taskOf(rec, tid)
	return reply(req.ID, wire.CreateTaskResult{ResultType: wire.ResultTypeTask, Task: t.Task})
}

// launch makes the call, or finds the call it repeats (see retry.go).
// Repeats that may re-attach are launched one at a time per proxy, so
// that two that race find one task.
func (ep *endpoint) launch(ctx context.Context, cp callParams, m meta, rp repeat, hash string) (deck.CallResult, error) {
	call := func() (deck.CallResult, error) {
		return ep.p.opts.Deck.Call(ctx, deck.CallRequest{
			Server: ep.ref(), Tool: cp.Name, Args: cp.Arguments, Answers: cp.InputResponses, Agent: m.Agent,
			Owner: ep.who.who.Name, HandleHash: hash, Key: rp.key,
		})
	}
	if !rp.reattach || rp.key != "" {
		return call() // a key finds its record by itself
	}
	v, err, _ := ep.p.launching.Do(hash, func() (any, error) {
		open, err := ep.openRepeat(ctx, cp.Name, hash)
		if err != nil {
			return deck.CallResult{}, err
		}
		if open == nil {
			return call()
		}
		return deck.CallResult{Task: open, Reused: true, NeedsInput: open.TaskID == "" && len(open.PendingInputs()) > 0}, nil
	})
	return v.(deck.CallResult), err
}

// callError words a failed Call for the agent: the server's own refusal
// when there is one, else what the Deck said.
func callError(id json.RawMessage, rec *model.Task, err error) *response {
	if rec != nil && rec.Error != nil {
		return &response{JSONRPC: "2.0", ID: id, Error: &jsonrpc.Error{Code: rec.Error.Code, Message: rec.Error.Message, Data: rec.Error.Data}}
	}
	code := int64(jsonrpc.CodeInternalError)
	switch deck.KindOf(err) {
	case deck.KindUsage, deck.KindConflict:
		code = jsonrpc.CodeInvalidParams
	}
	return fail(id, code, "taskdeck: "+err.Error())
}

// pending is the input requests still to answer.
func pending(rec *model.Task) map[string]model.InputRequest {
	out := map[string]model.InputRequest{}
	for _, k := range rec.PendingInputs() {
		out[k] = rec.InputRequests[k]
	}
	return out
}

// complete is a CallToolResult as a 2026-07-28 result: with resultType.
func complete(result json.RawMessage) json.RawMessage {
	var obj map[string]json.RawMessage
	if json.Unmarshal(result, &obj) != nil || obj == nil {
		obj = map[string]json.RawMessage{"content": json.RawMessage("[]")}
	}
	obj["resultType"] = json.RawMessage(`"complete"`)
	b, _ := json.Marshal(obj)
	return b
}

// toolError is a tool result that reports an error to the model.
func toolError(msg string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{
		"resultType": wire.ResultTypeComplete,
		"content":    []map[string]string{{"type": "text", "text": msg}},
		"isError":    true,
	})
	return b
}

// ended reports a record that will not change by itself any more.
func ended(rec *model.Task) bool {
	return rec.Status.Terminal() || rec.Status == model.StatusOrphaned
}

// recordEnded answers a held call, or a call whose record ended without a
// task, with the record's outcome as an ordinary result.
func recordEnded(id json.RawMessage, rec *model.Task) *response {
	switch rec.Status {
	case model.StatusCompleted:
		return reply(id, complete(rec.Result))
	case model.StatusFailed:
		if rec.Error != nil {
			return &response{JSONRPC: "2.0", ID: id, Error: &jsonrpc.Error{Code: rec.Error.Code, Message: rec.Error.Message, Data: rec.Error.Data}}
		}
		return reply(id, toolError(fmt.Sprintf("the call failed: %s (taskdeck record %s)", cmpText(rec.LocalError, rec.StatusMessage), rec.ID)))
	case model.StatusCancelled:
		return reply(id, toolError(fmt.Sprintf("the task was cancelled (taskdeck record %s)", rec.ID)))
	}
	return reply(id, toolError(fmt.Sprintf("the task ended %s: %s (taskdeck record %s; `taskdeck get %s` shows it)", rec.Status, cmpText(rec.StatusMessage, rec.LocalError), rec.ID, rec.ID)))
}

func cmpText(a, b string) string {
	if a != "" {
		return a
	}
	if b != "" {
		return b
	}
	return "no reason given"
}

// hold keeps a call of an agent without the tasks extension open until
// its record ends: input requests are the operator's to answer (the
// record holds them: the dashboard and `taskdeck answer`). If the agent
// goes, the task goes on: the engine follows it and keeps its result.
func (ep *endpoint) hold(ctx context.Context, id json.RawMessage, rec *model.Task, token any) *response {
	if ended(rec) {
		return recordEnded(id, rec)
	}
	ctx, cancel := context.WithTimeoutCause(ctx, ep.p.opts.HoldLimit, errHoldLimit)
	defer cancel()
	var tick <-chan time.Time
	report := progressOf(ctx, token)
	if report != nil {
		t := time.NewTicker(keepAlive)
		defer t.Stop()
		tick = t.C
	}
	got, err := ep.until(ctx, rec.ID, func(e deck.Entry) bool { return ended(e.Task) }, report, tick)
	if got != nil {
		rec = got
	}
	switch {
	case err == nil:
		return recordEnded(id, rec)
	case context.Cause(ctx) == errHoldLimit: // not the agent's own deadline
		return reply(id, toolError(fmt.Sprintf("the task is still %s after %s; taskdeck follows it to its end: `taskdeck get %s` shows it",
			rec.Status, ep.p.opts.HoldLimit, rec.ID)))
	case ctx.Err() != nil:
		ep.p.log.Info("proxy: the agent left a held call; the task goes on", "id", rec.ID)
		return fail(id, jsonrpc.CodeInternalError, "the call was left; the task goes on: `taskdeck get "+rec.ID+"`")
	case errors.Is(err, errProxyClosed):
		return fail(id, jsonrpc.CodeInternalError, "taskdeck's proxy is stopping; the task goes on, and the next taskdeck watches it: `taskdeck get "+rec.ID+"`")
	}
	return fail(id, jsonrpc.CodeInternalError, fmt.Sprintf("taskdeck lost track of the task: %v; `taskdeck get %s` shows it", err, rec.ID))
}

// errHoldLimit is why a held call ends at the proxy's HoldLimit.
var errHoldLimit = errors.New("the proxy's hold limit passed")

// until waits for the record id to satisfy done, reading it again on
// every event about it. It returns the last record read. each, if not
// nil, sees every change of the record, and the last one again on each
// tick.
func (ep *endpoint) until(ctx context.Context, id string, done func(deck.Entry) bool, each func(*model.Task), tick <-chan time.Time) (*model.Task, error) {
	woken, stop, err := ep.p.hub.wait(id)
	if err != nil {
		return nil, err
	}
	defer stop()
	var last *model.Task
	read := true
	for {
		if read {
			// A read the agent's leaving does not cut short, but bounded.
			gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ep.p.opts.PollWait)
			e, err := ep.p.opts.Deck.Get(gctx, id)
			cancel()
			if err != nil {
				return last, err
			}
			if done(e) {
				return e.Task, nil
			}
			if each != nil && (last == nil || e.Task.Revision != last.Revision) {
				each(e.Task)
			}
			last = e.Task
		}
		select {
		case <-woken:
			read = true
			if err := ep.p.hub.ensure(); err != nil {
				return last, err
			}
		case <-tick:
			read = false
			each(last)
		case <-ctx.Done():
			return last, ctx.Err()
		}
	}
}

// handleSep joins a record's id, the secret and the tag in an agent's
// task id.
const handleSep = "."

// sealedPrefix marks a record's HandleHash that holds a nonce rather
// than a hash: the secret is the HMAC of the nonce under the proxy's key
// (sealed), so the proxy can give an agent its task ids again (the
// 2025-11-25 front's tasks/list, after a restart too) while the record
// still holds nothing that names the task to whoever lacks the key.
const sealedPrefix = "n:"

// newHandle is a fresh secret for an agent's task id (128 random bits,
// or their seal) and what the record keeps of it.
func (p *Proxy) newHandle() (secret, kept string) {
	nonce := strings.ToLower(rand.Text())
	if p.sealKey == nil {
		return nonce, hashHandle(nonce)
	}
	return p.sealed(nonce), sealedPrefix + nonce
}

func (p *Proxy) sealed(nonce string) string {
	mac := hmac.New(sha256.New, p.sealKey)
	mac.Write([]byte(nonce))
	return hex.EncodeToString(mac.Sum(nil)[:16])
}

func hashHandle(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// holds tells whether secret is the one of rec's task id.
func (p *Proxy) holds(rec *model.Task, secret string) bool {
	want, kept := hashHandle(secret), rec.HandleHash
	if nonce, ok := strings.CutPrefix(kept, sealedPrefix); ok && p.sealKey != nil {
		want, kept = p.sealed(nonce), secret
	}
	return subtle.ConstantTimeCompare([]byte(want), []byte(kept)) == 1
}

// secretOf is the secret of the task id the agent who was given for rec,
// where the proxy can make it again: a sealed one, or one its key or its
// re-attached call derived (retry.go). A random one is not kept.
func (p *Proxy) secretOf(rec *model.Task, who string) (string, bool) {
	var secret string
	key, keyed := strings.CutPrefix(rec.IdempotencyKey, agentKeyPrefix(who))
	switch {
	case strings.HasPrefix(rec.HandleHash, sealedPrefix):
		if p.sealKey == nil {
			return "", false
		}
		secret = p.sealed(rec.HandleHash[len(sealedPrefix):])
	case keyed:
		secret = derivedSecret("key", who, key)
	default:
		secret = derivedSecret("reattach", who, rec.Agent, rec.ArgsHash)
	}
	return secret, p.holds(rec, secret)
}

// agentID is the task id an agent is given: the record's id, which finds
// the record at once; the secret, without which the id names nothing; and,
// with a HandleKey, the tag that binds both to the agent (see tag).
func (p *Proxy) agentID(rec *model.Task, owner, secret string) string {
	if secret == "" {
		return rec.ID // an operator that named the record by its id
	}
	id := rec.ID + handleSep + secret
	if p.opts.HandleKey != nil {
		id += handleSep + p.tag(owner, rec.ID, secret)
	}
	return id
}

// tag is the HMAC, under the HandleKey, of an agent's name, a record's id
// and a secret (128 bits, hex): only the proxy makes one, so an id whose
// tag does not match the agent asking is no task of the agent's, known
// without reading the store (whose read would take longer for a record
// that exists).
func (p *Proxy) tag(owner, recID, secret string) string {
	mac := hmac.New(sha256.New, p.opts.HandleKey)
	for _, s := range []string{owner, recID, secret} {
		mac.Write([]byte(s))
		mac.Write([]byte{0})
	}
	return hex.EncodeToString(mac.Sum(nil)[:16])
}

// splitID splits an agent's task id into its parts.
func splitID(id string) (recID, secret, tag string) {
	recID, rest, _ := strings.Cut(id, handleSep)
	secret, tag, _ = strings.Cut(rest, handleSep)
	return recID, secret, tag
}

// errNoTask is every task an agent may not see, and every task that does
// not exist: the two answer alike.
var errNoTask = deck.Errorf(deck.KindNotFound, "no such task")

// record reads the record an agent's task id names, exactly (no prefix,
// no scan): of this endpoint's server, with the id's secret, and, for an
// agent, its own. An operator or a viewer may name any task of the
// server, by its record id too. Anything else is errNoTask.
func (ep *endpoint) record(ctx context.Context, id string) (deck.Entry, error) {
	recID, secret, tag := splitID(id)
	all := ep.who.seesAll()
	if !model.ValidID(recID) || (secret == "" && !all) {
		return deck.Entry{}, errNoTask
	}
	if key := ep.p.opts.HandleKey; key != nil && !all {
		// Decided before any read: another agent's id, a record id with
		// this agent's secret, a guess, all cost what an unknown id does.
		if subtle.ConstantTimeCompare([]byte(ep.p.tag(ep.who.who.Name, recID, secret)), []byte(tag)) != 1 {
			return deck.Entry{}, errNoTask
		}
	}
	e, err := ep.p.opts.Deck.Get(ctx, recID)
	if deck.KindOf(err) == deck.KindNotFound {
		return deck.Entry{}, errNoTask
	}
	if err != nil {
		return e, err
	}
	t := e.Task
	ok := t.ID == recID && t.Server.Name == ep.cfg.Name
	if secret != "" {
		ok = ep.p.holds(t, secret) && ok
	}
	if !all {
		ok = ok && t.Owner == ep.who.who.Name
	}
	if !ok {
		return deck.Entry{}, errNoTask
	}
	return e, nil
}

type taskParams struct {
	Meta           map[string]any             `json:"_meta"`
	TaskID         string                     `json:"taskId"`
	InputResponses map[string]json.RawMessage `json:"inputResponses,omitempty"`
}

// task answers tasks/get, tasks/update and tasks/cancel through the Deck.
func (ep *endpoint) task(ctx context.Context, req *request) *response {
	var tp taskParams
	if err := json.Unmarshal(req.Params, &tp); err != nil {
		return fail(req.ID, jsonrpc.CodeInvalidParams, req.Method+` params must be an object of "taskId" (a string) and "_meta" (an object)`)
	}
	if tp.TaskID == "" {
		return fail(req.ID, jsonrpc.CodeInvalidParams, req.Method+` needs params with "taskId"`)
	}
	if !metaOf(tp.Meta).Tasks {
		e := wire.ErrMissingCapability()
		return &response{JSONRPC: "2.0", ID: req.ID, Error: &jsonrpc.Error{Code: e.Code, Message: e.Message, Data: e.Data}}
	}
	e, err := ep.record(ctx, tp.TaskID)
	if err != nil {
		return taskError(req.ID, err)
	}
	d := ep.p.opts.Deck
	switch req.Method {
	case wire.MethodUpdate:
		// A task no longer waiting for input has no key outstanding: the
		// answers are ignored, as a server SHOULD (the extension).
		if _, err := d.Answer(ctx, e.Task.ID, tp.InputResponses); err != nil && deck.KindOf(err) != deck.KindState {
			return taskError(req.ID, err)
		}
		return reply(req.ID, wire.AckResult{ResultType: wire.ResultTypeComplete})
	case wire.MethodCancel:
		if _, err := d.Cancel(ctx, e.Task.ID); err != nil && deck.KindOf(err) != deck.KindState {
			return taskError(req.ID, err)
		}
		return reply(req.ID, wire.AckResult{ResultType: wire.ResultTypeComplete})
	}
	rec, err := ep.fresh(ctx, e)
	if err != nil {
		return taskError(req.ID, err)
	}
	return reply(req.ID, wire.GetTaskResult{ResultType: wire.ResultTypeComplete, DetailedTask: taskOf(rec, tp.TaskID)})
}

// defaultPollInterval paces tasks/get for a server that gives no
// pollIntervalMs (the spec suggests 1 s).
const defaultPollInterval = time.Second

// fresh is the record as fresh as the server allows: a task the server
// pushes is current in the record, and one polled less than its
// pollIntervalMs ago is as fresh as the server lets it be; either is
// answered as it is. Else the engine polls it now (never sooner than the
// server asked, as the engine's own polls wait the interval too) and the
// answer is the record that poll left.
func (ep *endpoint) fresh(ctx context.Context, e deck.Entry) (*model.Task, error) {
	rec := e.Task
	interval := rec.ServerPollInterval()
	if interval == 0 {
		interval = defaultPollInterval
	}
	if !rec.Pollable() || e.Poll.Pushed || time.Since(e.Poll.LastPolled) < interval {
		return rec, nil
	}
	pctx, cancel := context.WithTimeout(ctx, ep.p.opts.PollWait)
	defer cancel()
	// PollNow returns once the poll is in the record: no feed to wait on.
	if err := ep.p.opts.Deck.PollNow(pctx, []string{rec.ID}); err != nil {
		if ctx.Err() == nil && pctx.Err() != nil {
			return rec, nil // the poll is late: the record as it stands
		}
		return rec, err
	}
	got, err := ep.p.opts.Deck.Get(ctx, rec.ID)
	if err != nil {
		return rec, err
	}
	return got.Task, nil
}

// taskError words a Deck error on tasks/* as the spec's codes.
func taskError(id json.RawMessage, err error) *response {
	switch deck.KindOf(err) {
	case deck.KindNotFound:
		e := wire.ErrTaskNotFound()
		return fail(id, e.Code, e.Message)
	case deck.KindUsage, deck.KindState:
		return fail(id, jsonrpc.CodeInvalidParams, "taskdeck: "+err.Error())
	}
	return fail(id, jsonrpc.CodeInternalError, "taskdeck: "+err.Error())
}

// taskOf is a record as the agent sees it: its taskId is the id the agent
// was given (see agentID), the rest is the server's task.
func taskOf(rec *model.Task, id string) wire.DetailedTask {
	created := rec.ServerCreatedAt
	if created.IsZero() {
		created = rec.CreatedAt
	}
	t := wire.DetailedTask{Task: wire.Task{
		TaskID:        id,
		Status:        string(rec.Status),
		StatusMessage: rec.StatusMessage,
		CreatedAt:     wire.NowString(created),
		LastUpdatedAt: wire.NowString(rec.UpdatedAt),
		TTLMs:         (*wire.Ms)(rec.TTLMs),
	}}
	if rec.PollIntervalMs != nil {
		t.PollIntervalMs = (*wire.Ms)(rec.PollIntervalMs)
	}
	switch rec.Status {
	case model.StatusCalling:
		t.Status = string(model.StatusWorking)
	case model.StatusInputRequired:
		// Every request answered (or the next not fetched yet): the task
		// waits for its server, and input_required without inputRequests
		// is not a shape the extension allows.
		if t.InputRequests = pending(rec); len(t.InputRequests) == 0 {
			t.Status = string(model.StatusWorking)
		}
	case model.StatusCompleted:
		t.Result = rec.Result
	case model.StatusFailed:
		t.Error = rec.Error
		if t.Error == nil {
			t.Error = &model.RPCError{Code: jsonrpc.CodeInternalError, Message: cmpText(rec.LocalError, rec.StatusMessage)}
		}
	case model.StatusOrphaned, model.StatusUnknown:
		t.Status = string(model.StatusFailed)
		t.Error = &model.RPCError{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("taskdeck: the task is %s: %s", rec.Status, cmpText(rec.StatusMessage, rec.LocalError))}
	}
	return t
}
