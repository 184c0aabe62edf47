package proxy

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/taskdeck/taskdeck/mcpclient/wire"
)

// relayed are the agent's headers that go on to the server: the
// transport's own and trace context. The agent's cookies go only when the
// server's config says so; its Authorization is its token at the proxy
// and never goes. The config's headers are added by the upstream's client.
func relayed(from http.Header, credentials bool) http.Header {
	h := http.Header{}
	for k, vs := range from {
		ck := http.CanonicalHeaderKey(k)
		switch {
		case strings.HasPrefix(ck, "Mcp-"), ck == "Accept", ck == "Content-Type", ck == "Traceparent", ck == "Tracestate", ck == "Baggage":
		case credentials && ck == "Cookie":
		default:
			continue
		}
		h[ck] = vs
	}
	return h
}

// synthesized are the headers of a request that came over stdio, as an
// HTTP client would have sent them.
func synthesized(req *request) http.Header {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "application/json, text/event-stream")
	h.Set("Mcp-Method", req.Method)
	var p struct {
		Name   string         `json:"name"`
		URI    string         `json:"uri"`
		TaskID string         `json:"taskId"`
		Meta   map[string]any `json:"_meta"`
	}
	_ = json.Unmarshal(req.Params, &p)
	version, _ := p.Meta[mcp.MetaKeyProtocolVersion].(string)
	if version == "" {
		version = wire.ProtocolVersion
	}
	h.Set("Mcp-Protocol-Version", version)
	if name := p.Name + p.URI + p.TaskID; name != "" {
		h.Set("Mcp-Name", name)
	}
	return h
}

// send relays one request to the server.
func (ep *endpoint) send(ctx context.Context, body []byte, h http.Header) (*http.Response, error) {
	up, err := ep.p.upstream(ep.cfg)
	if err != nil {
		return nil, err
	}
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, up.URL, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	r.Header = h
	return up.Client.Do(r)
}

// unreachable words a server that could not be reached for the agent.
func (ep *endpoint) unreachable(id json.RawMessage, err error) *response {
	if ue, ok := errors.AsType[*url.Error](err); ok {
		err = ue.Err // it names the URL, which may hold a secret
	}
	return fail(id, jsonrpc.CodeInternalError, "taskdeck proxy: no answer from server "+ep.cfg.Name+": "+err.Error())
}

// forwardHTTP relays a request to the server and streams its answer back
// as it comes (an event stream is not buffered).
func (ep *endpoint) forwardHTTP(w http.ResponseWriter, r *http.Request, req *request, body []byte) {
	resp, err := ep.send(r.Context(), body, relayed(r.Header, ep.cfg.ForwardAgentCredentials))
	if err != nil {
		if r.Context().Err() == nil {
			writeHTTP(w, http.StatusOK, ep.unreachable(req.ID, err))
		}
		return
	}
	defer resp.Body.Close()
	for _, k := range []string{"Content-Type", "Retry-After", "Cache-Control"} {
		if v := resp.Header.Get(k); v != "" {
			w.Header().Set(k, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	rc := http.NewResponseController(w)
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			_ = rc.Flush()
		}
		if err != nil {
			return // the end, or a bound passed: the agent sees the stream end
		}
	}
}

// messages reads the JSON-RPC messages of an answer, JSON or an event
// stream, and hands each to yield.
func messages(resp *http.Response, yield func([]byte) error) error {
	ctype, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if ctype != "text/event-stream" {
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		if len(bytes.TrimSpace(b)) == 0 {
			return nil
		}
		return yield(b)
	}
	var yerr error
	err := wire.ScanEvents(resp.Body, mcp.DefaultMaxEventSize, func(data []byte) bool {
		yerr = yield(data)
		return yerr != nil
	})
	return cmp.Or(yerr, err)
}

// exchange relays a request and returns the messages of its answer.
func (ep *endpoint) exchange(ctx context.Context, req *request, body []byte, h http.Header) ([][]byte, *response) {
	resp, err := ep.send(ctx, body, h)
	if err != nil {
		return nil, ep.unreachable(req.ID, err)
	}
	defer resp.Body.Close()
	var out [][]byte
	if err := messages(resp, func(m []byte) error { out = append(out, bytes.Clone(m)); return nil }); err != nil {
		return nil, ep.unreachable(req.ID, err)
	}
	if len(out) == 0 && !req.notification() {
		return nil, fail(req.ID, jsonrpc.CodeInternalError, "taskdeck proxy: server "+ep.cfg.Name+" answered HTTP "+resp.Status+" with no message")
	}
	return out, nil
}

// discover relays server/discover and advertises the tasks extension: the
// proxy serves it for every server, whatever the server itself does.
func (ep *endpoint) discover(ctx context.Context, req *request, h http.Header) *response {
	body, _ := json.Marshal(req)
	msgs, bad := ep.exchange(ctx, req, body, h)
	if bad != nil {
		return bad
	}
	var res struct {
		Result map[string]json.RawMessage `json:"result"`
		Error  *jsonrpc.Error             `json:"error"`
	}
	if err := json.Unmarshal(msgs[len(msgs)-1], &res); err != nil || (res.Result == nil && res.Error == nil) {
		return fail(req.ID, jsonrpc.CodeInternalError, "taskdeck proxy: server "+ep.cfg.Name+" answered server/discover with no result")
	}
	if res.Error != nil {
		return &response{JSONRPC: "2.0", ID: req.ID, Error: res.Error}
	}
	var caps map[string]json.RawMessage
	_ = json.Unmarshal(res.Result["capabilities"], &caps)
	if caps == nil {
		caps = map[string]json.RawMessage{}
	}
	var exts map[string]json.RawMessage
	_ = json.Unmarshal(caps["extensions"], &exts)
	if exts == nil {
		exts = map[string]json.RawMessage{}
	}
	if _, ok := exts[wire.ExtensionID]; !ok {
		exts[wire.ExtensionID] = json.RawMessage("{}")
	}
	caps["extensions"], _ = json.Marshal(exts)
	res.Result["capabilities"], _ = json.Marshal(caps)
	return reply(req.ID, res.Result)
}
