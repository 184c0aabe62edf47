// Package demo is a real tasks-capable MCP server (2026-07-28 with the
// io.modelcontextprotocol/tasks extension) on go-sdk, with demonstration
// tools. It backs `taskdeck demo-server`, the tests and the benchmarks.
package demo

import (
	"context"
	"crypto/rand"
	"log/slog"
	"maps"
	"net/http"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/taskdeck/taskdeck/mcpclient/wire"
)

// Options configure a Server. Zero values select the defaults.
type Options struct {
	Logger       *slog.Logger  // nil → discard. Never writes to stdout/stderr.
	TTL          time.Duration // task lifetime advertised as ttlMs (default 10m); tasks are deleted after it
	PollInterval time.Duration // pollIntervalMs advertised (default 500ms)
	Speed        float64       // multiplies tool durations (default 1; tests use e.g. 0.05). 0 = 1.
	// Hostile adds HostileTool, whose texts carry terminal escapes, for
	// tests that prove clients show server text inert. Off by default.
	Hostile bool
	// Hold adds HoldTool, whose task changes only when Step is called, for
	// tests and benchmarks that choose the moment of a change. Off by
	// default: called from a dashboard it would wait until its TTL.
	Hold bool
	// JSONResponse answers each POST with one application/json body
	// instead of an SSE stream (go-sdk's default); real servers do either.
	JSONResponse bool
	// NoPush makes subscriptions/listen acknowledge no task ids and end at
	// once, as on a server without push (spec §8), so that clients' polling
	// path stays tested.
	NoPush bool
	// KeepAlive is how often an HTTP listen stream with nothing to push
	// carries an SSE comment, so that a client can tell a quiet stream
	// from a dead one (default 15s, within mcpclient.DefaultPushSilence).
	KeepAlive time.Duration
}

// Stats are counters for tests.
type Stats struct {
	ToolCalls    map[string]int // tools/call received per tool (each request, incl. MRTR rounds)
	TasksCreated int
	TaskIDs      []string // every task id created, in order
	Gets         int
	Updates      int
	Cancels      int
	// Subscriptions counts the subscriptions/listen streams for task ids
	// the server pushed on (none under NoPush).
	Subscriptions int
}

// Server is the demo MCP server.
type Server struct {
	opts     Options
	log      *slog.Logger
	mcp      *mcp.Server
	http     http.Handler
	tasks    *table
	taskOnly map[string]func(*mcp.CallToolParamsRaw) bool // tool → MRTR gate (nil: none)
	stateKey []byte                                       // signs MRTR requestState

	mu    sync.Mutex
	stats Stats
	holds map[string]chan struct{} // running hold tasks → their step signal
}

// New builds a server with all demo tools registered.
func New(opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.TTL <= 0 {
		opts.TTL = 10 * time.Minute
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = 500 * time.Millisecond
	}
	if opts.Speed <= 0 {
		opts.Speed = 1
	}
	s := &Server{
		opts:     opts,
		log:      opts.Logger,
		tasks:    newTable(opts.TTL, opts.PollInterval),
		stateKey: []byte(rand.Text()),
		stats:    Stats{ToolCalls: map[string]int{}},
		holds:    map[string]chan struct{}{},
	}
	// go-sdk logs three Info lines per stateless POST: keep only its warnings.
	sdkLog := slog.New(minLevel{opts.Logger.Handler(), slog.LevelWarn})
	caps := &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}}
	caps.AddExtension(wire.ExtensionID, nil)
	s.mcp = mcp.NewServer(&mcp.Implementation{Name: "taskdeck-demo", Version: "0.1.0"},
		&mcp.ServerOptions{Capabilities: caps, Logger: sdkLog})
	s.addTools()
	s.addInstant()
	s.addHeaderTool()
	if opts.Hostile {
		s.addHostile()
	}
	if opts.Hold {
		s.addHold()
	}
	s.mcp.AddReceivingMiddleware(s.middleware)
	must(mcp.AddReceivingCustomMethod(s.mcp, wire.MethodGet, s.getTask))
	must(mcp.AddReceivingCustomMethod(s.mcp, wire.MethodUpdate, s.updateTask))
	must(mcp.AddReceivingCustomMethod(s.mcp, wire.MethodCancel, s.cancelTask))
	s.http = s.listenHandler(newHTTPHandler(s.mcp, sdkLog, opts.JSONResponse))
	return s
}

// MCPServer returns the go-sdk server, for in-memory use.
func (s *Server) MCPServer() *mcp.Server { return s.mcp }

// Stats returns a copy of the counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.ToolCalls = maps.Clone(s.stats.ToolCalls)
	st.TaskIDs = slices.Clone(s.stats.TaskIDs)
	return st
}

// Close cancels every running task and waits for their goroutines. Calls
// that arrive afterwards cannot create tasks.
func (s *Server) Close() { s.tasks.close() }

func (s *Server) count(f func(*Stats)) {
	s.mu.Lock()
	f(&s.stats)
	s.mu.Unlock()
}

// middleware turns tools/call of task tools into tasks.
func (s *Server) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (_ mcp.Result, err error) {
		defer s.recoverTo(&err, method) // go-sdk recovers no panic: one would end the process
		r, ok := req.(*mcp.CallToolRequest)
		if method != "tools/call" || !ok || r.Params == nil {
			return next(ctx, method, req)
		}
		s.count(func(st *Stats) { st.ToolCalls[r.Params.Name]++ })
		if string(r.Params.Arguments) == "null" {
			// go-sdk would apply schema defaults to a nil map and panic.
			r.Params.Arguments = nil
		}
		ready, taskOnly := s.taskOnly[r.Params.Name]
		if !taskOnly {
			return next(ctx, method, req)
		}
		if r.ProtocolVersion() < wire.ProtocolVersion || !wire.DeclaresExtension(r.Params.GetMeta()) {
			return nil, wire.ErrMissingCapability()
		}
		if ready != nil && !ready(r.Params) {
			return next(ctx, method, req) // an MRTR round, before any task exists
		}
		return s.start(next, r)
	}
}

// recoverTo turns a panic into an internal error.
func (s *Server) recoverTo(err *error, what string) {
	if p := recover(); p != nil {
		s.log.Error("panic", "in", what, "panic", p, "stack", string(debug.Stack()))
		*err = &jsonrpc.Error{Code: wire.CodeInternal, Message: "internal error"}
	}
}

func (s *Server) getTask(_ context.Context, _ *mcp.ServerSession, p *wire.GetTaskParams) (*wire.GetTaskResult, error) {
	s.count(func(st *Stats) { st.Gets++ })
	// Custom methods accept missing params: p may be a typed nil.
	if p == nil {
		return nil, invalidParams("missing params")
	}
	if !wire.DeclaresExtension(p.GetMeta()) {
		return nil, wire.ErrMissingCapability()
	}
	return s.tasks.get(p.TaskID)
}

func (s *Server) updateTask(_ context.Context, _ *mcp.ServerSession, p *wire.UpdateTaskParams) (*wire.AckResult, error) {
	s.count(func(st *Stats) { st.Updates++ })
	if p == nil {
		return nil, invalidParams("missing params")
	}
	if !wire.DeclaresExtension(p.GetMeta()) {
		return nil, wire.ErrMissingCapability()
	}
	if err := s.tasks.update(p.TaskID, p.InputResponses); err != nil {
		return nil, err
	}
	return &wire.AckResult{ResultType: wire.ResultTypeComplete}, nil
}

func (s *Server) cancelTask(_ context.Context, _ *mcp.ServerSession, p *wire.CancelTaskParams) (*wire.AckResult, error) {
	s.count(func(st *Stats) { st.Cancels++ })
	if p == nil {
		return nil, invalidParams("missing params")
	}
	if !wire.DeclaresExtension(p.GetMeta()) {
		return nil, wire.ErrMissingCapability()
	}
	if err := s.tasks.cancel(p.TaskID); err != nil {
		return nil, err
	}
	return &wire.AckResult{ResultType: wire.ResultTypeComplete}, nil
}

// minLevel drops records below a level.
type minLevel struct {
	slog.Handler
	min slog.Level
}

func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h minLevel) WithAttrs(as []slog.Attr) slog.Handler {
	return minLevel{h.Handler.WithAttrs(as), h.min}
}

func (h minLevel) WithGroup(name string) slog.Handler {
	return minLevel{h.Handler.WithGroup(name), h.min}
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}
