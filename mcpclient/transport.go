package mcpclient

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// callInfo rides in a request's context down to the transports, which
// go-sdk gives no other way to reach: the HTTP layer reads the task id for
// Mcp-Name and writes back Retry-After; the connection layer writes back
// the raw tools/call result that go-sdk would otherwise decode lossily.
type callInfo struct {
	taskID string

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
	meta *sentMeta
}

func (t captureTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	conn, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &captureConn{Connection: conn, meta: t.meta, pending: map[jsonrpc.ID]*callInfo{}}, nil
}

// sentMeta is the per-request _meta (protocol version, client info and
// capabilities) as go-sdk encodes it; its encoding of the capabilities
// is its own (the plain one would add "roots":{}).
type sentMeta struct {
	mu  sync.Mutex
	raw json.RawMessage
}

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
	meta *sentMeta

	mu      sync.Mutex
	pending map[jsonrpc.ID]*callInfo
}

func (c *captureConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if req, ok := msg.(*jsonrpc.Request); ok && req.Method == "server/discover" {
		c.meta.keep(req.Params)
	}
	if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() && (req.Method == "tools/call" || req.Method == "tools/list") {
		if info := callInfoFrom(ctx); info != nil {
			c.mu.Lock()
			c.pending[req.ID] = info
			c.mu.Unlock()
			// A caller that gives up must not leave its slot behind.
			context.AfterFunc(ctx, func() { c.drop(req.ID) })
		}
	}
	return c.Connection.Write(ctx, msg)
}

func (c *captureConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
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

// headerTransport adds the configured headers to every request, sets
// Mcp-Name to the task id on tasks/* requests (go-sdk does not, pitfall 5),
// and reports a server's Retry-After back to the caller.
type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
}

func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
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
	resp, err := t.base.RoundTrip(req)
	if err == nil && info != nil && (resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable) {
		if d, ok := parseRetryAfter(resp.Header.Get("Retry-After"), time.Now()); ok {
			info.mu.Lock()
			info.retryAfter = d
			info.mu.Unlock()
		}
	}
	return resp, err
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
