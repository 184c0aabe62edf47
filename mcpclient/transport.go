package mcpclient

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskdeck/taskdeck/mcpclient/config"
	"github.com/taskdeck/taskdeck/mcpclient/legacy"
)

// callInfo rides in a request's context down to the transports, which
// go-sdk gives no other way to reach: the HTTP layer reads the task id for
// Mcp-Name and writes back Retry-After; the connection layer writes back
// the raw tools/call result that go-sdk would otherwise decode lossily.
type callInfo struct {
	taskID string
	task   *legacy.TaskParams // set: a 2025-11-25 tools/call sent as a task
	// alone: the request (tools/call) goes on a connection of its own,
	// never one kept from an earlier request (see aloneTransport).
	alone bool

	mu         sync.Mutex
	raw        json.RawMessage
	retryAfter time.Duration
}

type callInfoKey struct{}

func withCallInfo(ctx context.Context, info *callInfo) context.Context {
	return context.WithValue(ctx, callInfoKey{}, info)
}

func callInfoFrom(ctx context.Context) *callInfo {
	info, _ := ctx.Value(callInfoKey{}).(*callInfo)
	return info
}

func (c *callInfo) result() json.RawMessage {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.raw
}

// captureTransport wraps a transport so that the raw result of every
// tools/call made with a callInfo is kept: go-sdk's CallToolResult drops
// the task handle's fields (go-sdk-tasks.md, pitfall 1). tools/list is
// kept too, for the tools as the server sent them. It also keeps the
// _meta go-sdk sends with server/discover, for the direct tasks/get.
type captureTransport struct {
	mcp.Transport
	meta      *sentMeta
	stateless bool // streamable HTTP: see captureConn.Write
}

func (t captureTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	conn, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &captureConn{Connection: conn, meta: t.meta, stateless: t.stateless, pending: map[jsonrpc.ID]*callInfo{}}, nil
}

// sentMeta is the per-request _meta (protocol version, client info and
// capabilities) as go-sdk encodes it; its encoding of the capabilities
// is its own (the plain one would add "roots":{}). It also keeps why
// server/discover failed, which go-sdk hides behind its fallback to
// initialize.
type sentMeta struct {
	mu         sync.Mutex
	raw        json.RawMessage
	discoverID jsonrpc.ID
	discover   error
	// initialize (the 2025-11-25 handshake): its id and raw result, whose
	// capabilities.tasks go-sdk does not decode.
	initID  jsonrpc.ID
	initRaw json.RawMessage
}

func (m *sentMeta) initResult() json.RawMessage {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.initRaw
}

func (m *sentMeta) discoverFailed(err error) {
	m.mu.Lock()
	m.discover = fmt.Errorf("%s: %w", methodDiscover, err)
	m.mu.Unlock()
}

func (m *sentMeta) discoverErr() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.discover
}

const methodDiscover = "server/discover"

func (m *sentMeta) get() json.RawMessage {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.raw
}

func (m *sentMeta) keep(params json.RawMessage) {
	var p struct {
		Meta json.RawMessage `json:"_meta"`
	}
	if json.Unmarshal(params, &p) == nil && len(p.Meta) > 0 {
		m.mu.Lock()
		m.raw = p.Meta
		m.mu.Unlock()
	}
}

type captureConn struct {
	mcp.Connection
	meta      *sentMeta
	stateless bool

	mu      sync.Mutex
	pending map[jsonrpc.ID]*callInfo
}

func (c *captureConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if req, ok := msg.(*jsonrpc.Request); ok && c.stateless && req.Method == "notifications/cancelled" {
		// Over stateless HTTP the request's connection is closed, which is
		// all a server can act on: this would be a POST of its own, to a
		// fresh session, and against a stalled server go-sdk's Close
		// waits 5 s for it.
		return nil
	}
	if req, ok := msg.(*jsonrpc.Request); ok && req.Method == methodDiscover {
		c.meta.keep(req.Params)
		c.meta.mu.Lock()
		c.meta.discoverID = req.ID
		c.meta.mu.Unlock()
		err := c.Connection.Write(ctx, msg)
		if err != nil {
			c.meta.discoverFailed(err)
		}
		return err
	}
	if req, ok := msg.(*jsonrpc.Request); ok && req.Method == "initialize" {
		// Declared on the 2025-11-25 handshake only: the stateless
		// revision has no initialize.
		params, err := legacy.WithTasksCapability(req.Params)
		if err != nil {
			return err
		}
		c.meta.mu.Lock()
		c.meta.initID = req.ID
		c.meta.mu.Unlock()
		msg = &jsonrpc.Request{ID: req.ID, Method: req.Method, Params: params, Extra: req.Extra}
	}
	if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() && (req.Method == "tools/call" || req.Method == "tools/list") {
		if info := callInfoFrom(ctx); info != nil {
			if info.task != nil && req.Method == "tools/call" {
				params, err := legacy.WithTask(req.Params, *info.task)
				if err != nil {
					return err
				}
				msg = &jsonrpc.Request{ID: req.ID, Method: req.Method, Params: params, Extra: req.Extra}
			}
			c.mu.Lock()
			c.pending[req.ID] = info
			c.mu.Unlock()
			// A caller that gives up must not leave its slot behind.
			context.AfterFunc(ctx, func() { c.drop(req.ID) })
		}
	}
	if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() {
		msg = withTrace(ctx, req)
	}
	return c.Connection.Write(ctx, msg)
}

func (c *captureConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if resp, ok := msg.(*jsonrpc.Response); ok {
		c.meta.mu.Lock()
		discover := resp.ID == c.meta.discoverID && resp.ID.IsValid()
		if resp.ID == c.meta.initID && resp.ID.IsValid() && resp.Error == nil {
			c.meta.initRaw = append(json.RawMessage(nil), resp.Result...)
		}
		if discover && resp.Error == nil {
			// go-sdk retried (after -32022 naming the version it asked
			// for, as a server behind a balancer may answer once): the
			// retry's answer is the one that counts.
			c.meta.discover = nil
		}
		c.meta.mu.Unlock()
		if discover && resp.Error != nil {
			c.meta.discoverFailed(resp.Error)
		}
	}
	if resp, ok := msg.(*jsonrpc.Response); ok {
		c.mu.Lock()
		info := c.pending[resp.ID]
		delete(c.pending, resp.ID)
		c.mu.Unlock()
		if info != nil && resp.Error == nil {
			info.mu.Lock()
			info.raw = append(json.RawMessage(nil), resp.Result...)
			info.mu.Unlock()
		}
	}
	return msg, err
}

func (c *captureConn) drop(id jsonrpc.ID) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

// headerTransport adds the configured headers to every request for the
// configured origin (to no other), sets Mcp-Name to the task id on
// tasks/* requests (go-sdk does not, pitfall 5), and reports a server's
// Retry-After back to the caller.
type headerTransport struct {
	base    http.RoundTripper
	alone   http.RoundTripper // for tools/call (see aloneTransport); nil: base
	headers map[string]string
	url     *url.URL // the configured URL: its origin is the only one headers go to
}

func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !t.sameOrigin(req.URL) {
		return t.base.RoundTrip(req)
	}
	info := callInfoFrom(req.Context())
	taskID := ""
	if info != nil {
		taskID = info.taskID
	}
	// A RoundTripper must not change the request it is given, but a clone
	// per request is a good part of a poll's cost: the direct tasks/get
	// sets the headers itself, so only a request that lacks one is cloned.
	if !t.hasHeaders(req.Header, taskID) {
		req = req.Clone(req.Context())
		t.setHeaders(req.Header, taskID)
	}
	// A tools/call: named by its header (this wire, and what the proxy
	// relays) or, on the 2025-11-25 wire, which has none, by its callInfo.
	base := t.base
	if t.alone != nil && (info != nil && info.alone || req.Header.Get("Mcp-Method") == "tools/call") {
		base = t.alone
	}
	resp, err := base.RoundTrip(req)
	if err == nil && info != nil && (resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable) {
		if d, ok := parseRetryAfter(resp.Header.Get("Retry-After"), time.Now()); ok {
			info.mu.Lock()
			info.retryAfter = d
			info.mu.Unlock()
		}
	}
	return resp, err
}

// sameOrigin tells whether u is for the configured origin. Every request
// but a redirected one is for the configured URL itself, so the poll pays
// for no more than a comparison.
func (t *headerTransport) sameOrigin(u *url.URL) bool {
	return u.Scheme == t.url.Scheme && u.Host == t.url.Host || originOf(u) == originOf(t.url)
}

// originOf is scheme://host:port, lower case, the port spelled out.
func originOf(u *url.URL) string {
	port := u.Port()
	if port == "" {
		switch strings.ToLower(u.Scheme) {
		case "http":
			port = "80"
		case "https":
			port = "443"
		}
	}
	return strings.ToLower(u.Scheme + "://" + net.JoinHostPort(u.Hostname(), port))
}

// refuseRedirects is the CheckRedirect of every client taskdeck makes:
// streamable HTTP has no use for a redirect, and following one would send
// the request and its headers to wherever the server points.
func refuseRedirects(req *http.Request, via []*http.Request) error {
	return &RedirectError{Method: via[0].Header.Get("Mcp-Method"), Code: req.Response.StatusCode, Location: config.RedactURL(req.URL.String())}
}

// boundedTransport bounds every answer go-sdk reads to maxResponseBytes,
// counted after gzip is inflated, as readAnswer bounds tasks/get: go-sdk
// reads a JSON body whole. It reads such a body here, so that one past
// the bound fails as this request's own error; go-sdk would take a
// failed read for a broken session. A stream is bounded as it is read.
type boundedTransport struct{ base http.RoundTripper }

func (t boundedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	body := &boundedReader{r: resp.Body, left: maxResponseBytes, method: req.Header.Get("Mcp-Method")}
	if ctype, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); ctype == "text/event-stream" {
		resp.Body = struct {
			io.Reader
			io.Closer
		}{body, resp.Body}
		return resp, nil
	}
	data, err := io.ReadAll(body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(data))
	return resp, nil
}

// setHeaders puts the configured headers on h, and Mcp-Name when the
// request is about a task.
func (t *headerTransport) setHeaders(h http.Header, taskID string) {
	for k, v := range t.headers {
		h.Set(k, v)
	}
	if taskID != "" {
		h.Set("Mcp-Name", headerValue(taskID))
	}
}

// hasHeaders tells whether h already holds exactly what setHeaders would
// put there.
func (t *headerTransport) hasHeaders(h http.Header, taskID string) bool {
	only := func(k, v string) bool {
		vs := h.Values(k)
		return len(vs) == 1 && vs[0] == v
	}
	for k, v := range t.headers {
		if !only(k, v) {
			return false
		}
	}
	return taskID == "" || only("Mcp-Name", headerValue(taskID))
}

// headerValue encodes a value that is not plain visible ASCII, or that
// looks like an encoded value, as the transport spec asks.
func headerValue(v string) string {
	const open, end = "=?base64?", "?="
	plain := len(v) < len(open)+len(end) || !strings.HasPrefix(v, open) || !strings.HasSuffix(v, end)
	for i := 0; plain && i < len(v); i++ {
		plain = v[i] >= 0x20 && v[i] < 0x7f
	}
	if plain {
		return v
	}
	return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(v)) + "?="
}

// parseRetryAfter reads delay-seconds or an HTTP date.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	if s, err := strconv.Atoi(v); err == nil && s >= 0 {
		return time.Duration(s) * time.Second, true
	}
	if at, err := http.ParseTime(v); err == nil {
		return max(at.Sub(now), 0), true
	}
	return 0, false
}
