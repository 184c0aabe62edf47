package mcpclient

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"reflect"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/taskdeck/taskdeck/internal/version"
	"github.com/taskdeck/taskdeck/mcpclient/config"
	"github.com/taskdeck/taskdeck/mcpclient/legacy"
	"github.com/taskdeck/taskdeck/mcpclient/wire"
	"github.com/taskdeck/taskdeck/model"
)

// DefaultRequestTimeout bounds one request to a server unless told otherwise.
const DefaultRequestTimeout = 30 * time.Second

// Version is what taskdeck calls itself in clientInfo.
var Version = version.Number()

// PoolOptions configure how servers are reached.
type PoolOptions struct {
	Config *config.Config
	// Lookup expands ${VAR}; os.LookupEnv when nil.
	Lookup func(string) (string, bool)
	// Logger gets go-sdk's logs; nil discards them.
	Logger *slog.Logger
	// ChildStderr receives stdio servers' stderr (the log file): never the
	// terminal. nil discards it.
	ChildStderr io.Writer
	// Warn is told about risky connections (plain http to a remote host).
	Warn func(msg string)
	// RequestTimeout bounds connecting and listing tools, for every
	// caller; DefaultRequestTimeout when zero.
	RequestTimeout time.Duration
	// PushSilence: a listen stream that carries nothing (no event, no
	// keep-alive) for this long is taken as dropped; DefaultPushSilence
	// when zero.
	PushSilence time.Duration
	// IdlePerServer is how many connections to a server are kept open
	// between requests: one per poll that may be in flight (the engine's
	// PerServer); DefaultPerServer when zero. A request beyond them dials.
	IdlePerServer int
}

// Pool keeps one session per server, connecting on first use and again
// after a transport failure. Sessions are stateless on the wire, so one
// session serves any number of concurrent requests.
type Pool struct {
	opts PoolOptions
	// ctx bounds every connect; Close cancels it. A connect runs on its
	// own, detached from the caller that started it, so that the callers
	// waiting for the same server each give up on their own terms.
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	entries map[model.ServerRef]*poolEntry
	closed  bool
}

type poolEntry struct {
	ready chan struct{}
	sess  *Session
	err   error
}

// NewPool makes a pool; nothing is connected until used.
func NewPool(opts PoolOptions) *Pool {
	if opts.Config == nil {
		opts.Config = &config.Config{}
	}
	if opts.Lookup == nil {
		opts.Lookup = os.LookupEnv
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.ChildStderr == nil {
		opts.ChildStderr = io.Discard
	}
	if opts.RequestTimeout == 0 {
		opts.RequestTimeout = DefaultRequestTimeout
	}
	if opts.PushSilence == 0 {
		opts.PushSilence = DefaultPushSilence
	}
	if opts.IdlePerServer == 0 {
		opts.IdlePerServer = DefaultPerServer
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Pool{opts: opts, ctx: ctx, cancel: cancel, entries: map[model.ServerRef]*poolEntry{}}
}

// Resolve finds the configuration a reference points at.
func (p *Pool) Resolve(ref model.ServerRef) (config.ServerConfig, error) {
	if ref.Name != "" {
		p.mu.Lock()
		cfg := p.opts.Config
		p.mu.Unlock()
		return cfg.Server(ref.Name)
	}
	return config.AdHoc(ref.URL)
}

// SetConfig puts cfg in use (a reloaded config file). A server whose
// entry changed or went is disconnected (a stdio server stops), so that
// its next use connects as cfg says; the others keep their sessions.
func (p *Pool) SetConfig(cfg *config.Config) {
	if cfg == nil {
		cfg = &config.Config{}
	}
	p.mu.Lock()
	old := p.opts.Config
	p.opts.Config = cfg
	var gone []*poolEntry
	for ref, e := range p.entries {
		if ref.Name == "" {
			continue // an ad-hoc URL is no entry of the config
		}
		was, _ := old.Server(ref.Name)
		now, err := cfg.Server(ref.Name)
		if err != nil || !reflect.DeepEqual(was, now) {
			delete(p.entries, ref)
			gone = append(gone, e)
		}
	}
	p.mu.Unlock()
	for _, e := range gone {
		go func() { // a connect still under way ends as it would have
			<-e.ready
			if e.sess != nil {
				e.sess.cs.Close()
			}
		}()
	}
}

// Session returns a connected session for the server, connecting once for
// all concurrent callers. Connecting takes at most the request timeout;
// one that failed is forgotten, so the next caller connects anew.
func (p *Pool) Session(ctx context.Context, ref model.ServerRef) (*Session, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, errors.New("client is closed")
	}
	e, ok := p.entries[ref]
	if !ok {
		e = &poolEntry{ready: make(chan struct{})}
		p.entries[ref] = e
		// The connect serves every caller, so one that leaves does not end
		// it; but a caller that has given up already starts none that dials.
		base := p.ctx
		if ctx.Err() != nil {
			base = ctx
		}
		go func() {
			cctx, cancel := WithRequestTimeout(base, p.opts.RequestTimeout)
			defer cancel()
			e.sess, e.err = p.connect(cctx, ref)
			close(e.ready)
			if e.err != nil {
				p.forget(ref, e)
			}
		}()
	}
	p.mu.Unlock()
	select {
	case <-e.ready:
		return e.sess, e.err
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.DeadlineExceeded) { // the caller's time is up: the server's fault
			return nil, classify(ref.String(), fmt.Errorf("%s: %w", methodDiscover, ctx.Err()), false, nil)
		}
		return nil, ctx.Err()
	}
}

// Connected returns the server's session if it is connected already: the
// poll's way in, which needs no deadline (nor its timer) for a connect.
func (p *Pool) Connected(ref model.ServerRef) (*Session, bool) {
	p.mu.Lock()
	e, ok := p.entries[ref]
	p.mu.Unlock()
	if !ok || !e.isReady() || e.err != nil {
		return nil, false
	}
	return e.sess, true
}

// Drop closes a session that failed, so the next use reconnects. The close
// runs in the background: go-sdk's Close waits for the session's requests
// in flight, which against a stalled server would hold the caller (a poll)
// far past its request timeout.
func (p *Pool) Drop(s *Session) {
	p.mu.Lock()
	e, ok := p.entries[s.ref]
	mine := ok && e.isReady() && e.sess == s // an entry still connecting is someone else's
	if mine {
		delete(p.entries, s.ref)
	}
	p.mu.Unlock()
	if mine {
		go s.close()
	}
}

func (e *poolEntry) isReady() bool {
	select {
	case <-e.ready:
		return true
	default:
		return false
	}
}

func (p *Pool) forget(ref model.ServerRef, e *poolEntry) {
	p.mu.Lock()
	if p.entries[ref] == e {
		delete(p.entries, ref)
	}
	p.mu.Unlock()
}

// Close ends every session (and stops stdio servers).
func (p *Pool) Close() {
	p.cancel() // a connect in flight gives up
	p.mu.Lock()
	p.closed = true
	entries := p.entries
	p.entries = map[model.ServerRef]*poolEntry{}
	p.mu.Unlock()
	for _, e := range entries {
		<-e.ready
		if e.sess != nil {
			e.sess.close()
		}
	}
}

func (p *Pool) connect(ctx context.Context, ref model.ServerRef) (_ *Session, err error) {
	cfg, err := p.Resolve(ref)
	if err != nil {
		return nil, err
	}
	cfg, err = cfg.Expand(p.opts.Lookup)
	if err != nil {
		return nil, err
	}
	var transport mcp.Transport
	var hc *http.Client
	var ht *headerTransport
	var pooled *http.Transport // nil for stdio
	if cfg.URL != "" {
		if !cfg.IsLoopbackOrHTTPS() && p.opts.Warn != nil {
			p.opts.Warn(fmt.Sprintf("server %s is reached over plain http on a non-loopback address: traffic and task ids are not encrypted", config.RedactURL(ref.String())))
		}
		u, err := url.Parse(cfg.URL)
		if err != nil {
			return nil, err // checked when the config was loaded and expanded
		}
		pooled = pooledTransport(p.opts.IdlePerServer)
		defer func() {
			if err != nil { // a failed connect keeps no connection open
				pooled.CloseIdleConnections()
			}
		}()
		ht = &headerTransport{base: pooled, alone: aloneTransport(pooled), headers: cfg.Headers, url: u}
		// The direct tasks/get bounds its answers itself; go-sdk's are
		// bounded by its client.
		hc = &http.Client{Transport: ht, CheckRedirect: refuseRedirects}
		sdk := &http.Client{Transport: boundedTransport{ht}, CheckRedirect: refuseRedirects}
		transport = &mcp.StreamableClientTransport{Endpoint: cfg.URL, HTTPClient: sdk, DisableStandaloneSSE: true}
	} else {
		// No shell: the command and its arguments go to exec as they are.
		cmd := exec.Command(cfg.Command, cfg.Args...)
		cmd.Env = os.Environ()
		for k, v := range cfg.Env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		cmd.Stderr = p.opts.ChildStderr
		// go-sdk waits this long after closing the server's stdin, and again
		// after SIGTERM, before SIGKILL: 1 s each keeps a stuck server from
		// outliving taskdeck's own grace after a signal (5 s).
		transport = &mcp.CommandTransport{Command: cmd, TerminateDuration: time.Second}
	}

	caps := &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{
		Form: &mcp.FormElicitationCapabilities{}, URL: &mcp.URLElicitationCapabilities{},
	}}
	caps.AddExtension(wire.ExtensionID, nil)
	// On the 2025-11-25 wire the server asks its questions as
	// elicitation/create requests; they are held for the operator.
	lt := newLegacyTasks()
	client := mcp.NewClient(&mcp.Implementation{Name: "taskdeck", Version: Version}, &mcp.ClientOptions{
		Logger:       p.opts.Logger,
		Capabilities: caps,
		// Input requests are the operator's to answer, not the SDK's.
		MultiRoundTrip:     &mcp.MultiRoundTripOptions{Disabled: true},
		ElicitationHandler: lt.elicit,
	})
	for _, err := range []error{
		mcp.AddSendingCustomMethod[*wire.GetTaskParams, *wire.GetTaskResult](client, wire.MethodGet),
		mcp.AddSendingCustomMethod[*wire.UpdateTaskParams, *wire.AckResult](client, wire.MethodUpdate),
		mcp.AddSendingCustomMethod[*wire.CancelTaskParams, *wire.AckResult](client, wire.MethodCancel),
		mcp.AddSendingCustomMethod[*legacy.IDParams, *legacy.Raw](client, legacy.MethodResult),
		mcp.AddSendingCustomMethod[*legacy.ListParams, *legacy.Raw](client, legacy.MethodList),
	} {
		if err != nil {
			lt.cancel()
			return nil, err
		}
	}
	version := cmp.Or(cfg.Protocol, wire.ProtocolVersion) // 2026-07-28 falls back to 2025-11-25
	meta := &sentMeta{}
	cs, err := client.Connect(ctx, captureTransport{transport, meta, cfg.URL != ""}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	var init *mcp.InitializeResult
	if err == nil {
		init = cs.InitializeResult()
	}
	if err == nil && init != nil && init.ProtocolVersion == legacy.ProtocolVersion && cfg.Protocol != wire.ProtocolVersion && answered(meta.discoverErr()) {
		// The server refused server/discover in JSON-RPC and speaks the
		// sessioned revision. One whose discover failed on the way (no
		// answer, an oversized one) is reported as that, below.
		return p.legacySession(ref, client, cs, pooled, meta, init, lt)
	}
	lt.cancel()
	if derr := meta.discoverErr(); derr != nil && !(err == nil && unknownMethod(derr)) {
		// go-sdk falls back to initialize when server/discover fails; what
		// failed is server/discover, so that is what is reported. Only an
		// older server, which does not know server/discover but answers
		// initialize, is told by its version below.
		if cs != nil {
			cs.Close()
		}
		return nil, classify(ref.String(), derr, false, nil)
	}
	if err != nil {
		return nil, classify(ref.String(), err, false, nil)
	}
	if init == nil || init.ProtocolVersion != wire.ProtocolVersion {
		cs.Close()
		got := "an older protocol"
		if init != nil {
			got = init.ProtocolVersion
		}
		return nil, fmt.Errorf("server %s speaks %s; taskdeck needs MCP %s (stateless, tasks extension) or %s (sessioned, tasks capability)", config.RedactURL(ref.String()), RedactedLine(got), wire.ProtocolVersion, legacy.ProtocolVersion)
	}
	s := &Session{ref: ref, cs: cs, pooled: pooled, timeout: p.opts.RequestTimeout, silence: p.opts.PushSilence, log: p.opts.Logger, Protocol: wire.ProtocolVersion}
	if hc != nil && meta.get() != nil {
		s.direct = &directGet{client: hc, headers: ht, url: cfg.URL, meta: meta.get()}
	}
	if init.Capabilities != nil {
		_, s.SupportsTasks = init.Capabilities.Extensions[wire.ExtensionID]
	}
	if init.ServerInfo != nil {
		s.ServerName, s.ServerVersion = init.ServerInfo.Name, init.ServerInfo.Version
	}
	return s, nil
}

// answered tells a server's refusal of server/discover (a JSON-RPC error,
// an HTTP 4xx; or no error: the revision was pinned) from a request that
// failed on the way: no answer in time, an answer past the size bound, a
// redirect, a broken connection.
func answered(err error) bool {
	return err == nil || !(errors.As(err, new(*tooLargeError)) || errors.As(err, new(*RedirectError)) ||
		errors.As(err, new(net.Error)) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled))
}

// legacySession is a connected 2025-11-25 session.
func (p *Pool) legacySession(ref model.ServerRef, client *mcp.Client, cs *mcp.ClientSession, pooled *http.Transport, meta *sentMeta, init *mcp.InitializeResult, lt *legacyTasks) (*Session, error) {
	// The revision's tasks/get and tasks/cancel answer in shapes of their
	// own: this session's client sends them with its types.
	for _, method := range []string{legacy.MethodGet, legacy.MethodCancel} {
		if err := mcp.AddSendingCustomMethod[*legacy.IDParams, *legacy.Raw](client, method); err != nil {
			lt.cancel()
			cs.Close()
			return nil, err
		}
	}
	raw := meta.initResult()
	lt.cs = cs
	lt.callsAsTasks = legacy.CallsAsTasks(raw)
	lt.lists = legacy.Lists(raw)
	s := &Session{ref: ref, cs: cs, pooled: pooled, timeout: p.opts.RequestTimeout, silence: p.opts.PushSilence, log: p.opts.Logger, legacy: lt}
	s.Protocol = legacy.ProtocolVersion
	s.SupportsTasks = lt.callsAsTasks
	if init.ServerInfo != nil {
		s.ServerName, s.ServerVersion = init.ServerInfo.Name, init.ServerInfo.Version
	}
	return s, nil
}

// unknownMethod is a JSON-RPC "method not found" answer.
func unknownMethod(err error) bool {
	var werr *jsonrpc.Error
	return errors.As(err, &werr) && werr.Code == wire.CodeMethodNotFound
}

// pooledTransport is http.DefaultTransport with room to keep a connection
// idle for each of idle polls in flight: the default keeps two per host,
// so with more in flight most polls paid for a new TCP connection (and
// left one in TIME_WAIT). No more than that: each connection kept is two
// goroutines and a socket.
func pooledTransport(idle int) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = idle
	return t
}

// aloneTransport is pooled's twin that keeps no connection, for the
// request that must not be sent twice: tools/call. A kept connection can
// be closed by its server just as a request goes out on it (Go's net/http
// server closes one never used after its ReadHeaderTimeout, Node's after
// 5 s idle; a busy machine widens the moment): net/http then fails the
// POST with EOF or a reset and, rightly, does not send it again, and the
// call fails though the server never saw it. A connection of its own
// costs a call one connect.
func aloneTransport(pooled *http.Transport) *http.Transport {
	t := pooled.Clone()
	t.DisableKeepAlives = true
	return t
}

// Session is a connection to one server.
type Session struct {
	ref                       model.ServerRef
	cs                        *mcp.ClientSession
	pooled                    *http.Transport // its connections; nil for stdio
	direct                    *directGet      // tasks/get over HTTP; nil for stdio
	timeout                   time.Duration   // bounds a tool listing
	silence                   time.Duration   // ends a listen stream that carries nothing
	log                       *slog.Logger
	tools                     toolCache
	legacy                    *legacyTasks // set: the session speaks 2025-11-25
	Protocol                  string       // the revision negotiated
	SupportsTasks             bool
	ServerName, ServerVersion string
}

// close ends the session: its held questions and tasks/result requests
// first, then the connection and the connections it keeps idle (they
// would otherwise stay open, two goroutines and a socket each, until the
// transport's idle timeout).
func (s *Session) close() {
	if s.legacy != nil {
		s.legacy.cancel()
	}
	s.cs.Close()
	if s.pooled != nil {
		s.pooled.CloseIdleConnections()
	}
}

// CallTool sends tools/call with the tasks extension declared and returns
// what came back: a result, a task handle, or input requests (MRTR).
// The session's tool list comes first (listed once per ttl): go-sdk sends
// x-mcp-header arguments as Mcp-Param-* headers only for a listed tool. A
// list that cannot be had does not hold the call back: a server that
// needs the headers refuses it. A refusal for the headers (-32020) with a
// list from before this call means the tool changed since: the list is
// listed again and the call, which the server never acted on, sent again.
func (s *Session) CallTool(ctx context.Context, tool string, args json.RawMessage, answers map[string]json.RawMessage, requestState string) (*wire.CallOutcome, error) {
	if s.legacy != nil {
		return s.legacyCall(ctx, tool, args) // no input before a task on this wire
	}
	params := &mcp.CallToolParams{Name: tool, Arguments: args, RequestState: requestState}
	if len(args) == 0 {
		params.Arguments = json.RawMessage("{}")
	}
	if len(answers) > 0 {
		raw, err := json.Marshal(answers)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(raw, &params.InputResponses); err != nil {
			return nil, fmt.Errorf("input responses: %w", err)
		}
	}
	_, fetched, listErr := s.tools.get(ctx, s, false)
	info := &callInfo{alone: true}
	_, err := s.cs.CallTool(withCallInfo(ctx, info), params)
	if refusedForHeaders(err) && listErr == nil && !fetched {
		if _, _, listErr = s.tools.get(ctx, s, true); listErr == nil {
			info = &callInfo{alone: true}
			_, err = s.cs.CallTool(withCallInfo(ctx, info), params)
		}
	}
	if err != nil {
		return nil, classify(s.ref.String(), err, false, info)
	}
	raw := info.result()
	if raw == nil {
		// Never decode through go-sdk's type: it would drop a task handle.
		return nil, &TransportError{Server: s.ref.String(), Err: errors.New("tools/call result was not captured")}
	}
	return wire.DecodeCallResult(raw)
}

// GetTask sends one tasks/get: over HTTP on its own, over stdio through
// go-sdk's session.
func (s *Session) GetTask(ctx context.Context, taskID string) (*model.Snapshot, error) {
	if s.legacy != nil {
		return s.legacyGet(ctx, taskID)
	}
	info := &callInfo{taskID: taskID}
	ctx = withCallInfo(ctx, info)
	var res *wire.GetTaskResult
	var err error
	if s.direct != nil {
		res, err = s.direct.get(ctx, taskID)
	} else {
		res, err = mcp.CallCustomMethod[*wire.GetTaskParams, *wire.GetTaskResult](
			ctx, s.cs, wire.MethodGet, &wire.GetTaskParams{TaskID: taskID})
	}
	if err != nil {
		return nil, classify(s.ref.String(), err, true, info)
	}
	return wire.DecodeTask(res)
}

// UpdateTask sends answers to input requests with tasks/update.
func (s *Session) UpdateTask(ctx context.Context, taskID string, answers map[string]json.RawMessage) error {
	if s.legacy != nil {
		return s.legacyUpdate(taskID, answers)
	}
	info := &callInfo{taskID: taskID}
	_, err := mcp.CallCustomMethod[*wire.UpdateTaskParams, *wire.AckResult](
		withCallInfo(ctx, info), s.cs, wire.MethodUpdate, &wire.UpdateTaskParams{TaskID: taskID, InputResponses: answers})
	return classify(s.ref.String(), err, true, info)
}

// CancelTask sends tasks/cancel. An unknown task counts as cancelled: the
// server has nothing left to stop.
func (s *Session) CancelTask(ctx context.Context, taskID string) error {
	if s.legacy != nil {
		return s.legacyCancel(ctx, taskID)
	}
	info := &callInfo{taskID: taskID}
	_, err := mcp.CallCustomMethod[*wire.CancelTaskParams, *wire.AckResult](
		withCallInfo(ctx, info), s.cs, wire.MethodCancel, &wire.CancelTaskParams{TaskID: taskID})
	return classify(s.ref.String(), err, true, info)
}

// ListTools lists every tool the server offers, sorted by name, from the
// session's tool list (see Tools).
func (s *Session) ListTools(ctx context.Context) ([]*mcp.Tool, error) {
	l, err := s.Tools(ctx)
	if err != nil {
		return nil, err
	}
	return l.Tools, nil
}

// DefaultPerServer bounds the polls in flight to one server.
const DefaultPerServer = 8
