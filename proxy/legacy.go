package proxy

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/mcpclient"
	"github.com/taskdeck/taskdeck/mcpclient/legacy"
	"github.com/taskdeck/taskdeck/model"
)

// The proxy's 2025-11-25 front: an agent that initializes with that
// revision gets a session of the proxy's own (Mcp-Session-Id), tools that
// say execution.taskSupport "optional", and the revision's tasks
// (SEP-1686): tools/call with params.task answers {"task": {...}} once the
// record is committed; tasks/get, tasks/result, tasks/cancel and tasks/list
// go through the Deck, as the 2026-07-28 front's do. The server behind may
// speak either revision: the engine speaks to it.

// Bounds of the legacy front.
const (
	// maxLegacySessions bounds the sessions whose state is kept, and the
	// ended sessions remembered. Past it the least recently used state
	// is dropped: its id still works (see legacyFront), only the
	// questions relayed on it go to the operator.
	maxLegacySessions = 1024
	// maxLabel bounds the clientInfo name a session id carries, in bytes.
	maxLabel = 128
	// maxListed bounds the tasks tasks/list gives (the newest), and
	// maxListScan the server's records it reads to find them.
	maxListed   = 1000
	maxListScan = 20 * listPage
	listPage    = 500
	// maxAsks bounds the questions one tasks/result relays to its agent;
	// the rest are the operator's.
	maxAsks = 64
)

// legacyFront is the state of the 2025-11-25 front: its sessions. A
// session id is a nonce, what the session must remember (the agent's
// name and whether it takes questions) and an HMAC of both with the
// agent's principal and the server, under a key derived from the
// HandleKey: the proxy knows its own ids again without storing them, so
// neither a restart nor a dropped state ends a session, and another
// principal's, or another server's, is refused. Only DELETE ends one,
// remembered while the proxy runs (a session's authority is the token
// that comes with it, not its id).
type legacyFront struct {
	key        []byte
	mu         sync.Mutex
	sessions   map[string]*legacySession // by id
	ended      map[string]bool
	endedOrder []string // oldest first
	clock      uint64   // orders the sessions' uses
}

type legacySession struct {
	label  string // the agent's clientInfo name, never trusted
	elicit bool   // the agent declared elicitation: questions go to it
	seq    uint64 // the front's clock at its last use
	// asks are the questions relayed on this session, by the id of the
	// elicitation/create request the agent will answer.
	asks map[string]ask
}

type ask struct {
	key string // the record's input request
	to  chan<- agentAnswer
}

// agentAnswer is an agent's JSON-RPC response to a relayed question.
type agentAnswer struct {
	key    string
	Result json.RawMessage `json:"result"`
	Error  *jsonrpc.Error  `json:"error"`
}

// newLegacyFront signs session ids with a key derived from handleKey; a
// random one without (sessions end with the process).
func newLegacyFront(handleKey []byte) *legacyFront {
	key := subKey(handleKey, "taskdeck proxy: 2025-11-25 sessions")
	if key == nil {
		key = []byte(rand.Text())
	}
	return &legacyFront{key: key, sessions: map[string]*legacySession{}, ended: map[string]bool{}}
}

func (l *legacyFront) sign(who, server, nonce, info string) string {
	mac := hmac.New(sha256.New, l.key)
	for _, s := range []string{who, server, nonce, info} {
		mac.Write([]byte(s))
		mac.Write([]byte{0})
	}
	return hex.EncodeToString(mac.Sum(nil)[:16])
}

// newLegacySession is the state of a session an agent opened as label;
// elicit: it takes questions.
func newLegacySession(label string, elicit bool) *legacySession {
	if len(label) > maxLabel {
		label = strings.ToValidUTF8(label[:maxLabel], "")
	}
	return &legacySession{label: label, elicit: elicit, asks: map[string]ask{}}
}

// open makes a session for who at server.
func (l *legacyFront) open(who, server, label string, elicit bool) string {
	s := newLegacySession(label, elicit)
	info := "n"
	if elicit {
		info = "e"
	}
	info += base64.RawURLEncoding.EncodeToString([]byte(s.label))
	nonce := rand.Text()
	id := nonce + "." + info + "." + l.sign(who, server, nonce, info)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.keep(id, s)
	return id
}

// verify reads a session id the front signed for who at server.
func (l *legacyFront) verify(id, who, server string) (*legacySession, bool) {
	nonce, rest, _ := strings.Cut(id, ".")
	info, mac, _ := strings.Cut(rest, ".")
	if info == "" || subtle.ConstantTimeCompare([]byte(l.sign(who, server, nonce, info)), []byte(mac)) != 1 {
		return nil, false
	}
	label, err := base64.RawURLEncoding.DecodeString(info[1:])
	if err != nil {
		return nil, false
	}
	return newLegacySession(string(label), info[0] == 'e'), true
}

// keep adds a session's state, dropping the least recently used one's at
// the bound. l.mu is held.
func (l *legacyFront) keep(id string, s *legacySession) {
	if len(l.sessions) >= maxLegacySessions {
		var oldest string
		for sid, o := range l.sessions {
			if oldest == "" || o.seq < l.sessions[oldest].seq {
				oldest = sid
			}
		}
		delete(l.sessions, oldest)
	}
	l.clock++
	s.seq = l.clock
	l.sessions[id] = s
}

// use finds the session id of who at server: another agent's session, or
// another server's, or an ended one, is none.
func (l *legacyFront) use(id, who, server string) (*legacySession, bool) {
	fresh, ok := l.verify(id, who, server)
	if !ok {
		return nil, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended[id] {
		return nil, false
	}
	s := l.sessions[id]
	if s == nil { // a restart, or a state dropped at the bound
		l.keep(id, fresh)
		return fresh, true
	}
	l.clock++
	s.seq = l.clock
	return s, true
}

func (l *legacyFront) end(id, who, server string) bool {
	if _, ok := l.verify(id, who, server); !ok {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended[id] {
		return false
	}
	delete(l.sessions, id)
	if len(l.endedOrder) >= maxLegacySessions {
		delete(l.ended, l.endedOrder[0])
		l.endedOrder = l.endedOrder[1:]
	}
	l.ended[id] = true
	l.endedOrder = append(l.endedOrder, id)
	return true
}

// ask registers a question relayed on s; the agent's answer goes to to.
func (l *legacyFront) ask(s *legacySession, key string, to chan<- agentAnswer) string {
	id := "taskdeck-" + rand.Text()
	l.mu.Lock()
	defer l.mu.Unlock()
	s.asks[id] = ask{key: key, to: to}
	return id
}

func (l *legacyFront) unask(s *legacySession, id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(s.asks, id)
}

// answered hands an agent's response on s to the tasks/result that asked,
// if it still waits, and reports whether body was a response.
func (l *legacyFront) answered(s *legacySession, body []byte) bool {
	var msg struct {
		ID     string          `json:"id"`
		Method string          `json:"method"`
		Result json.RawMessage `json:"result"`
		Error  *jsonrpc.Error  `json:"error"`
	}
	if json.Unmarshal(body, &msg) != nil || msg.Method != "" || (msg.Result == nil && msg.Error == nil) {
		return false
	}
	l.mu.Lock()
	a, ok := s.asks[msg.ID]
	delete(s.asks, msg.ID)
	l.mu.Unlock()
	if ok {
		// Never blocks: the channel holds maxAsks, one per question asked.
		a.to <- agentAnswer{key: a.key, Result: msg.Result, Error: msg.Error}
	}
	return true // one nobody waits for any more is moot, not wrong
}

// legacyInit tells an initialize of the 2025-11-25 revision.
func legacyInit(req *request) bool {
	if req.Method != "initialize" {
		return false
	}
	var p struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	_ = json.Unmarshal(req.Params, &p)
	return p.ProtocolVersion == legacy.ProtocolVersion
}

// legacyAgent reads, from an initialize, the agent's clientInfo name and
// whether it declared elicitation.
func legacyAgent(req *request) (label string, elicit bool) {
	var ip struct {
		ClientInfo struct {
			Name string `json:"name"`
		} `json:"clientInfo"`
		Capabilities struct {
			Elicitation json.RawMessage `json:"elicitation"`
		} `json:"capabilities"`
	}
	_ = json.Unmarshal(req.Params, &ip)
	return ip.ClientInfo.Name, ip.Capabilities.Elicitation != nil
}

// serveLegacy answers a request of a 2025-11-25 agent: an initialize, or
// a request on a session the proxy issued.
// bad is why body is no request: an agent's answer to a relayed question
// is none, and is taken here.
func (p *Proxy) serveLegacy(w http.ResponseWriter, r *http.Request, ep *endpoint, req *request, bad *response, body []byte) {
	who, server := ep.who.who.Name, ep.cfg.Name
	if bad == nil && req.Method == "initialize" {
		label, elicit := legacyAgent(req)
		w.Header().Set("Mcp-Session-Id", p.legacy.open(who, server, label, elicit))
		writeHTTP(w, http.StatusOK, reply(req.ID, ep.initialized()))
		return
	}
	s, ok := p.legacy.use(r.Header.Get("Mcp-Session-Id"), who, server)
	switch {
	case !ok:
		writeHTTPError(w, http.StatusNotFound, nil, jsonrpc.CodeInvalidRequest,
			"no such session at this proxy for this agent and server (it ended, or was never given): initialize again")
		return
	case bad != nil && p.legacy.answered(s, body):
		w.WriteHeader(http.StatusAccepted)
		return
	case bad != nil:
		writeHTTP(w, http.StatusBadRequest, bad)
		return
	}
	ep.legacy = s
	if req.notification() {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	if !ep.servesLegacy(req.Method) {
		// Resources, prompts and the rest go on to the server, without the
		// proxy's session, which is no session of the server's.
		r.Header.Del("Mcp-Session-Id")
		ep.forwardHTTP(w, r, req, body)
		return
	}
	sse := &sseWriter{w: w}
	ctx := traced(withAgentHeaders(acting(r.Context(), ep.who, s.label), r.Header), req, r.Header)
	if strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
		ctx = withNotifier(ctx, sse.notify)
	}
	sse.finish(plain(ep.handleLegacy(ctx, req)))
}

// servesLegacy tells the methods the legacy front answers itself: for a
// stdio server, every method (answerViaDeck refuses what it cannot).
func (ep *endpoint) servesLegacy(method string) bool {
	switch method {
	case "ping", "tools/list", "tools/call", legacy.MethodGet, legacy.MethodResult, legacy.MethodCancel, legacy.MethodList:
		return true
	}
	return ep.viaDeck()
}

// endLegacy ends the session a DELETE names.
func (p *Proxy) endLegacy(w http.ResponseWriter, r *http.Request, ep *endpoint) {
	if !p.legacy.end(r.Header.Get("Mcp-Session-Id"), ep.who.who.Name, ep.cfg.Name) {
		writeHTTPError(w, http.StatusNotFound, nil, jsonrpc.CodeInvalidRequest, "no such session at this proxy: nothing to end")
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// initialized is the proxy's InitializeResult: tools, and the tasks of
// tools/call with list and cancel, whatever the server itself offers.
func (ep *endpoint) initialized() map[string]any {
	return map[string]any{
		"protocolVersion": legacy.ProtocolVersion,
		"capabilities": map[string]any{
			"tools": map[string]any{},
			"tasks": map[string]any{"list": map[string]any{}, "cancel": map[string]any{},
				"requests": map[string]any{"tools": map[string]any{"call": map[string]any{}}}},
		},
		"serverInfo": map[string]string{"name": "taskdeck proxy for " + ep.cfg.Name, "version": mcpclient.Version},
	}
}

func (ep *endpoint) handleLegacy(ctx context.Context, req *request) *response {
	changes := req.Method == "tools/call" || req.Method == legacy.MethodCancel
	switch {
	case changes && !ep.who.who.CanChange():
		return fail(req.ID, jsonrpc.CodeInvalidRequest, "taskdeck proxy: "+quote(ep.who.who.Name)+" is a viewer: it may read tasks, not "+req.Method)
	case req.Method == "tools/call":
		return ep.call(ctx, req)
	case req.Method == "tools/list":
		return ep.legacyTools(ctx, req)
	case req.Method == legacy.MethodList:
		return ep.legacyList(ctx, req)
	case req.Method == legacy.MethodGet || req.Method == legacy.MethodResult || req.Method == legacy.MethodCancel:
		return ep.legacyTask(ctx, req)
	}
	return ep.answerViaDeck(ctx, req)
}

// plain drops the 2026-07-28 resultType from a result the 2026-07-28 path
// built (a held call's): the older revision has no such field.
func plain(res *response) *response {
	raw, ok := res.Result.(json.RawMessage)
	if !ok {
		return res
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil || obj["resultType"] == nil {
		return res
	}
	delete(obj, "resultType")
	b, _ := json.Marshal(obj)
	res.Result = json.RawMessage(b)
	return res
}

// legacyTools is the server's tools, each task-optional: behind taskdeck
// every call may be a task, the record being its handle.
func (ep *endpoint) legacyTools(ctx context.Context, req *request) *response {
	list, err := ep.p.opts.Deck.Tools(ctx, ep.ref(), false)
	if err != nil {
		return ep.unreachableViaDeck(req.ID, err)
	}
	tools := make([]map[string]json.RawMessage, 0, len(list.Tools))
	for _, t := range list.Tools {
		var tool, exec map[string]json.RawMessage
		if json.Unmarshal(t.Raw, &tool) != nil || tool == nil {
			continue // the Deck read it; not an object would not have listed
		}
		_ = json.Unmarshal(tool["execution"], &exec)
		if exec == nil {
			exec = map[string]json.RawMessage{}
		}
		exec["taskSupport"] = json.RawMessage(`"optional"`)
		tool["execution"], _ = json.Marshal(exec)
		tools = append(tools, tool)
	}
	return reply(req.ID, map[string]any{"tools": tools})
}

// legacyTaskOf is a record as a 2025-11-25 Task: the 2026-07-28 view of it
// (taskOf), with the revision's field names, and a failure's error
// message as its statusMessage: the revision has no error object on a
// task, and the server's last status message is no reason.
func legacyTaskOf(rec *model.Task, id string) legacy.Task {
	t := taskOf(rec, id)
	lt := legacy.Task{TaskID: t.TaskID, Status: t.Status, StatusMessage: t.StatusMessage,
		CreatedAt: t.CreatedAt, LastUpdatedAt: t.LastUpdatedAt, TTL: t.TTLMs, PollInterval: t.PollIntervalMs}
	if rec.Status == model.StatusInputRequired {
		lt.Status = string(model.StatusInputRequired) // the questions are asked elsewhere
	}
	if lt.Status == string(model.StatusFailed) && t.Error != nil {
		lt.StatusMessage = t.Error.Message
	}
	return lt
}

// legacyTask answers tasks/get, tasks/result and tasks/cancel.
func (ep *endpoint) legacyTask(ctx context.Context, req *request) *response {
	var ip legacy.IDParams
	if err := json.Unmarshal(req.Params, &ip); err != nil || ip.TaskID == "" {
		return fail(req.ID, jsonrpc.CodeInvalidParams, req.Method+` needs params with "taskId" (a string)`)
	}
	e, err := ep.record(ctx, ip.TaskID)
	if err != nil {
		return taskError(req.ID, err)
	}
	switch req.Method {
	case legacy.MethodCancel:
		if ended(e.Task) {
			return fail(req.ID, jsonrpc.CodeInvalidParams, fmt.Sprintf("the task has ended (%s): there is nothing to cancel", e.Task.Status))
		}
		rec, err := ep.p.opts.Deck.Cancel(ctx, e.Task.ID)
		if err != nil {
			return taskError(req.ID, err)
		}
		return reply(req.ID, legacyTaskOf(rec, ip.TaskID))
	case legacy.MethodResult:
		return ep.legacyResult(ctx, req.ID, e.Task, ip.TaskID)
	}
	rec, err := ep.fresh(ctx, e)
	if err != nil {
		return taskError(req.ID, err)
	}
	return reply(req.ID, legacyTaskOf(rec, ip.TaskID))
}

// legacyResult answers tasks/result: it waits, up to the hold limit, for
// the task to end (relaying its questions, see relay), then gives the
// tool's result with the related task in its _meta, or the call's own
// error.
func (ep *endpoint) legacyResult(ctx context.Context, id json.RawMessage, rec *model.Task, taskID string) *response {
	ctx, cancel := context.WithTimeoutCause(ctx, ep.p.opts.HoldLimit, errHoldLimit)
	defer cancel()
	got, err := ep.relay(ctx, rec.ID, taskID)
	switch {
	case err == nil:
		rec = got
	case context.Cause(ctx) == errHoldLimit:
		return fail(id, jsonrpc.CodeInternalError, fmt.Sprintf("the task is still %s after the proxy's hold limit of %s: ask tasks/result again", got.Status, ep.p.opts.HoldLimit))
	case errors.Is(err, errProxyClosed):
		return fail(id, jsonrpc.CodeInternalError, "taskdeck's proxy is stopping; the task goes on: ask tasks/result again of the next one")
	default:
		return taskError(id, err)
	}
	switch rec.Status {
	case model.StatusCompleted:
		var obj map[string]any
		if json.Unmarshal(rec.Result, &obj) != nil || obj == nil {
			obj = map[string]any{"content": []any{}}
		}
		meta, _ := obj["_meta"].(map[string]any)
		if meta == nil {
			meta = map[string]any{}
		}
		meta[legacy.RelatedTaskKey] = map[string]string{"taskId": taskID}
		obj["_meta"] = meta
		return reply(id, obj)
	case model.StatusFailed:
		if rec.Error != nil {
			return &response{JSONRPC: "2.0", ID: id, Error: &jsonrpc.Error{Code: rec.Error.Code, Message: rec.Error.Message, Data: rec.Error.Data}}
		}
	}
	return fail(id, jsonrpc.CodeInternalError, fmt.Sprintf("the task ended %s: %s", legacyTaskOf(rec, taskID).Status, cmpText(rec.StatusMessage, rec.LocalError)))
}

// legacyList answers tasks/list with the tasks this agent's principal
// started at this server through the proxy, read from the store (so a
// restart loses none), newest first: at most maxListed, found among the
// server's newest maxListScan records. Another agent's are not there, nor
// a record forgotten or pruned, nor one whose id the proxy cannot make
// again (a random secret of a proxy without a HandleKey). One page.
func (ep *endpoint) legacyList(ctx context.Context, req *request) *response {
	who := ep.who.who.Name
	tasks := []legacy.Task{}
	before := ""
	for read := 0; read < maxListScan && len(tasks) < maxListed; {
		page, err := ep.p.opts.Deck.List(ctx, deck.Filter{Server: ep.cfg.Name, Limit: listPage, Before: before})
		if err != nil {
			return taskError(req.ID, err)
		}
		for _, e := range page {
			if e.Task.Owner != who || len(tasks) == maxListed {
				continue
			}
			if secret, ok := ep.p.secretOf(e.Task, who); ok {
				tasks = append(tasks, legacyTaskOf(e.Task, ep.p.agentID(e.Task, who, secret)))
			}
		}
		if len(page) < listPage {
			break
		}
		read += len(page)
		before = page[len(page)-1].Task.ID
	}
	return reply(req.ID, map[string]any{"tasks": tasks})
}

// legacyCreated is the answer to a task-augmented tools/call: the record
// is the task, whether or not the server made one, so tasks/get and
// tasks/result answer for it alike.
func (ep *endpoint) legacyCreated(id json.RawMessage, rec *model.Task, taskID string) *response {
	return reply(id, map[string]any{"task": legacyTaskOf(rec, taskID)})
}

// relay waits for the record recID to end. While it waits for input, each
// question still unanswered goes to an agent that declared elicitation,
// as the server-to-client request it is (elicitation/create with the
// related task in its _meta), on this tasks/result's event stream; the
// agent's answer is given through the Deck, in its name, as an operator's
// would be. A question the operator answers first is moot: the agent's
// late answer is dropped. It returns the last record read.
func (ep *endpoint) relay(ctx context.Context, recID, taskID string) (*model.Task, error) {
	n, _ := ctx.Value(notifierKey{}).(notifier)
	s := ep.legacy
	relays := n != nil && s.elicit
	answers := make(chan agentAnswer, maxAsks)
	asked := map[string]string{} // input key → request id
	defer func() {
		for _, rid := range asked {
			ep.p.legacy.unask(s, rid)
		}
	}()
	woken, stop, err := ep.p.hub.wait(recID)
	if err != nil {
		return nil, err
	}
	defer stop()
	var last *model.Task
	for {
		// A read the agent's leaving does not cut short, but bounded.
		gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ep.p.opts.PollWait)
		e, err := ep.p.opts.Deck.Get(gctx, recID)
		cancel()
		if err != nil {
			return last, err
		}
		last = e.Task
		if ended(last) {
			return last, nil
		}
		if relays && last.Status == model.StatusInputRequired {
			keys := last.PendingInputs()
			slices.Sort(keys)
			for _, key := range keys {
				q := last.InputRequests[key]
				if _, ok := asked[key]; ok || len(asked) == maxAsks || q.Method != "elicitation/create" {
					continue
				}
				rid := ep.p.legacy.ask(s, key, answers)
				asked[key] = rid
				n(elicitRequest(rid, q, taskID))
			}
		}
		select {
		case <-woken:
			if err := ep.p.hub.ensure(); err != nil {
				return last, err
			}
		case a := <-answers:
			ep.agentAnswered(ctx, recID, a)
		case <-ctx.Done():
			return last, ctx.Err()
		}
	}
}

// elicitRequest is a question relayed to the agent as request id rid.
func elicitRequest(rid string, q model.InputRequest, taskID string) []byte {
	var params map[string]any
	if json.Unmarshal(q.Params, &params) != nil || params == nil {
		params = map[string]any{}
	}
	meta, _ := params["_meta"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
	}
	meta[legacy.RelatedTaskKey] = map[string]string{"taskId": taskID}
	params["_meta"] = meta
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": rid, "method": q.Method, "params": params})
	return b
}

// agentAnswered gives the agent's answer through the Deck (whose Answer
// also continues a call whose task does not exist yet), which checks it
// against the form and records who answered. A refusal of the request
// itself, or an answer the Deck refuses, leaves the question to the
// operator.
func (ep *endpoint) agentAnswered(ctx context.Context, recID string, a agentAnswer) {
	if a.Error != nil {
		ep.p.log.Info("proxy: the agent refused a relayed question; it is the operator's", "id", recID, "key", a.key, "err", a.Error.Message)
		return
	}
	if _, err := ep.p.opts.Deck.Answer(ctx, recID, map[string]json.RawMessage{a.key: a.Result}); err != nil && deck.KindOf(err) != deck.KindState {
		ep.p.log.Info("proxy: the agent's answer to a relayed question was refused; it is the operator's", "id", recID, "key", a.key, "err", err)
	}
}
