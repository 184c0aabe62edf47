package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/taskdeck/taskdeck/mcpclient/wire"
)

// request is one JSON-RPC message from an agent.
type request struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params,omitempty"`
}

func (r *request) notification() bool { return len(r.ID) == 0 }

// label is the agent's self-reported clientInfo name in the request's
// _meta, if any: shown beside its principal, never trusted.
func (r *request) label() string {
	var p struct {
		Meta map[string]any `json:"_meta"`
	}
	_ = json.Unmarshal(r.Params, &p)
	return metaOf(p.Meta).Agent
}

// response is one JSON-RPC answer to an agent.
type response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *jsonrpc.Error  `json:"error,omitempty"`
}

func reply(id json.RawMessage, result any) *response {
	return &response{JSONRPC: "2.0", ID: id, Result: result}
}

func fail(id json.RawMessage, code int64, msg string) *response {
	return &response{JSONRPC: "2.0", ID: id, Error: &jsonrpc.Error{Code: code, Message: msg}}
}

func (r *response) encode() []byte {
	if len(r.ID) == 0 {
		r.ID = json.RawMessage("null")
	}
	b, err := json.Marshal(r)
	if err != nil { // a result the proxy built itself: never
		b, _ = json.Marshal(fail(r.ID, jsonrpc.CodeInternalError, "taskdeck proxy could not encode its answer: "+err.Error()))
	}
	return b
}

// parse reads one JSON-RPC request, or says what is wrong with it.
func parse(body []byte) (*request, *response) {
	body = bytes.TrimSpace(body)
	if len(body) > 0 && body[0] == '[' {
		return nil, fail(nil, jsonrpc.CodeInvalidRequest, "a JSON-RPC batch is not part of MCP 2026-07-28; send one request per message")
	}
	var req request
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, fail(nil, jsonrpc.CodeParseError, "the request is not valid JSON: "+err.Error())
	}
	switch {
	case req.JSONRPC != "2.0":
		return nil, fail(req.ID, jsonrpc.CodeInvalidRequest, `the request is not JSON-RPC 2.0: "jsonrpc" must be "2.0"`)
	case req.Method == "":
		return nil, fail(req.ID, jsonrpc.CodeInvalidRequest, `the request has no "method"`)
	case len(req.ID) > 0 && req.ID[0] != '"' && (req.ID[0] < '0' || req.ID[0] > '9') && req.ID[0] != '-':
		return nil, fail(nil, jsonrpc.CodeInvalidRequest, `the request's "id" must be a string or a number`)
	case req.notification() && (req.Method == "tools/call" || strings.HasPrefix(req.Method, "tasks/")):
		// A notification is never answered: a call would launch a task
		// nobody hears of.
		return nil, fail(nil, jsonrpc.CodeInvalidRequest, req.Method+` requests need an id: send "id"`)
	}
	return &req, nil
}

// meta is what the proxy reads of a request's _meta.
type meta struct {
	Agent string // clientInfo name
	Tasks bool   // the tasks extension is declared
	Raw   map[string]any
}

// metaOf reads a request's _meta, decoded with the params it is part of
// (nil: an agent without a name or tasks).
func metaOf(raw map[string]any) meta {
	m := meta{Raw: raw, Tasks: wire.DeclaresExtension(raw)}
	if info, ok := raw[mcp.MetaKeyClientInfo].(map[string]any); ok {
		m.Agent, _ = info["name"].(string)
	}
	return m
}

func (p *Proxy) serveHTTP(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	pr := principalOf(r.Context())
	cfg, ok := p.server(name)
	switch {
	case !ok || !pr.may(name):
		// A server this agent may not use is one it cannot tell from none.
		writeHTTPError(w, http.StatusNotFound, nil, jsonrpc.CodeInvalidRequest, "no server "+quote(name)+" at this proxy; the servers are: "+p.names(pr))
		return
	case r.Method == http.MethodDelete && r.Header.Get("Mcp-Session-Id") != "":
		p.endLegacy(w, r, &endpoint{p: p, cfg: cfg, who: pr})
		return
	case r.Method != http.MethodPost:
		w.Header().Set("Allow", http.MethodPost)
		writeHTTPError(w, http.StatusMethodNotAllowed, nil, jsonrpc.CodeInvalidRequest, "MCP 2026-07-28 over HTTP is one POST per request")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, p.opts.MaxBody))
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		writeHTTPError(w, http.StatusRequestEntityTooLarge, nil, jsonrpc.CodeInvalidRequest, "the request is larger than the proxy's bound of "+size(p.opts.MaxBody)+"; send less")
		return
	}
	if err != nil {
		return // the agent went away mid-body
	}
	req, bad := parse(body)
	ep := &endpoint{p: p, cfg: cfg, who: pr}
	if r.Header.Get("Mcp-Session-Id") != "" || (bad == nil && legacyInit(req)) {
		p.serveLegacy(w, r, ep, req, bad, body)
		return
	}
	if bad == nil {
		bad = checkEnvelope(r.Header, req)
	}
	if bad != nil {
		writeHTTP(w, http.StatusBadRequest, bad)
		return
	}
	if ep.local(req.Method) {
		sse := &sseWriter{w: w, modern: modern(r.Header)}
		ctx := traced(withAgentHeaders(acting(r.Context(), pr, req.label()), r.Header), req, r.Header)
		if strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
			ctx = withNotifier(ctx, sse.notify)
		}
		res := ep.handle(ctx, req, relayed(r.Header, cfg.ForwardAgentCredentials))
		if req.notification() {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		sse.finish(res)
		return
	}
	ep.forwardHTTP(w, r, req, body)
}

// modern tells a request of MCP 2026-07-28 or later by its header: only
// those have the standard headers and the per-request _meta checked, and
// their errors carry HTTP statuses (older clients are served as before).
func modern(h http.Header) bool {
	return h.Get("Mcp-Protocol-Version") >= wire.ProtocolVersion
}

// checkEnvelope refuses, as a 2026-07-28 server does before anything
// runs, a request whose Mcp-Method or Mcp-Name header is missing or
// differs from its body (-32020), or whose _meta lacks the protocol
// version (-32602) or the client's capabilities (-32602) or names
// another version than its header (-32020). Every refusal is HTTP 400.
func checkEnvelope(h http.Header, req *request) *response {
	if !modern(h) {
		return nil
	}
	mismatch := func(msg string) *response {
		return fail(req.ID, wire.CodeHeaderMismatch, "header mismatch: "+msg)
	}
	switch method := headerText(h.Get("Mcp-Method")); {
	case method == "":
		return mismatch("send the Mcp-Method header with the request's method")
	case method != req.Method:
		return mismatch(fmt.Sprintf("Mcp-Method %q differs from the request's method %q", method, req.Method))
	}
	var p struct {
		Name   *string         `json:"name"`
		URI    *string         `json:"uri"`
		TaskID *string         `json:"taskId"`
		Meta   json.RawMessage `json:"_meta"`
	}
	if json.Unmarshal(req.Params, &p) != nil {
		return nil // not an object: the method's own check words it
	}
	var field string
	var value *string
	switch req.Method {
	case "tools/call", "prompts/get":
		field, value = "params.name", p.Name
	case "resources/read":
		field, value = "params.uri", p.URI
	case wire.MethodGet, wire.MethodUpdate, wire.MethodCancel:
		field, value = "params.taskId", p.TaskID
	}
	if field != "" && value != nil {
		switch name, ok := decodeHeader(headerText(h.Get("Mcp-Name"))); {
		case name == "":
			return mismatch(fmt.Sprintf("send the Mcp-Name header with %s for %s", field, req.Method))
		case !ok || name != *value:
			return mismatch(fmt.Sprintf("Mcp-Name %q differs from %s %q", h.Get("Mcp-Name"), field, *value))
		}
	}
	if req.notification() {
		return nil // the _meta triple is for requests only
	}
	var meta map[string]json.RawMessage
	_ = json.Unmarshal(p.Meta, &meta)
	var version string
	var caps map[string]any
	switch {
	case json.Unmarshal(meta[mcp.MetaKeyProtocolVersion], &version) != nil || version == "":
		return fail(req.ID, jsonrpc.CodeInvalidParams, `missing or invalid _meta field "`+mcp.MetaKeyProtocolVersion+`": every 2026-07-28 request carries it`)
	case version != headerText(h.Get("Mcp-Protocol-Version")):
		return mismatch(fmt.Sprintf("Mcp-Protocol-Version %q differs from _meta %q %q", h.Get("Mcp-Protocol-Version"), mcp.MetaKeyProtocolVersion, version))
	case json.Unmarshal(meta[mcp.MetaKeyClientCapabilities], &caps) != nil || caps == nil:
		return fail(req.ID, jsonrpc.CodeInvalidParams, `missing or invalid _meta field "`+mcp.MetaKeyClientCapabilities+`": every 2026-07-28 request carries it ({} for none)`)
	}
	return nil
}

// headerText is a header's value without the whitespace around it, which
// is not part of it (RFC 9110, 5.5).
func headerText(v string) string { return strings.Trim(v, " \t") }

// statusOf is the HTTP status of an answer, as the spec sets it and
// servers send it: 400 for a header mismatch or an unsupported version,
// whatever the version; for a 2026-07-28 request also 404 for an unknown
// method and 400 for invalid params or a missing capability; else 200.
func statusOf(res *response, modern bool) int {
	if res.Error == nil {
		return http.StatusOK
	}
	switch c := res.Error.Code; {
	case c == wire.CodeHeaderMismatch, c == wire.CodeUnsupportedVersion:
		return http.StatusBadRequest
	case !modern:
	case c == jsonrpc.CodeMethodNotFound:
		return http.StatusNotFound
	case c == jsonrpc.CodeInvalidParams, c == wire.CodeMissingCapability:
		return http.StatusBadRequest
	}
	return http.StatusOK
}

func writeHTTPError(w http.ResponseWriter, status int, id json.RawMessage, code int64, msg string) {
	writeHTTP(w, status, fail(id, code, msg))
}

func writeHTTP(w http.ResponseWriter, status int, res *response) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(res.encode())
}

// local tells the methods the proxy answers itself (through the Deck) from
// those it relays: for a stdio server, every method.
func (ep *endpoint) local(method string) bool {
	switch method {
	case "tools/call", wire.MethodGet, wire.MethodUpdate, wire.MethodCancel, "server/discover":
		return true
	}
	return ep.viaDeck()
}

// handle answers a request the proxy serves itself; h are the headers
// server/discover goes on with.
func (ep *endpoint) handle(ctx context.Context, req *request, h http.Header) *response {
	switch {
	case !ep.who.who.CanChange() && (req.Method == "tools/call" || req.Method == wire.MethodUpdate || req.Method == wire.MethodCancel):
		return fail(req.ID, jsonrpc.CodeInvalidRequest, "taskdeck proxy: "+quote(ep.who.who.Name)+" is a viewer: it may read tasks, not "+req.Method)
	case req.Method == "tools/call":
		return ep.call(ctx, req)
	case req.Method == "server/discover" && ep.viaDeck():
		return ep.discoverViaDeck(ctx, req)
	case req.Method == "server/discover":
		return ep.discover(ctx, req, h)
	case req.Method == wire.MethodGet || req.Method == wire.MethodUpdate || req.Method == wire.MethodCancel:
		return ep.task(ctx, req)
	}
	return ep.answerViaDeck(ctx, req)
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func size(n int64) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return strconv.FormatInt(n>>20, 10) + " MiB"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}
