package proxy

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/taskdeck/taskdeck/mcpclient/wire"
)

// SEP-2243: a tools/call over HTTP carries each argument its tool's input
// schema annotates with x-mcp-header also as an Mcp-Param-<Name> header,
// and a server refuses, before anything runs, a call whose headers are
// missing, unexpected or differ from the arguments (400, -32020). The
// proxy is the agent's server: it checks the agent's headers as the
// server would (the engine sends its own to the server, so a mismatch
// would otherwise go unseen by anyone who routes or audits by header).

// paramHeaders are the annotated arguments of one tool: argument path
// (a.b for a property of an object argument) -> header name.
type paramHeaders map[string]string

// headerTools caches the annotated arguments of one server's tools: the
// tool list is the server's and changes rarely, and reading it for every
// call would cost more than the call's own work in the proxy.
type headerTools struct {
	mu      sync.Mutex
	byTool  map[string]paramHeaders
	fetched time.Time
}

// headerToolsTTL is how long a tool list is used before it is read again.
const headerToolsTTL = time.Minute

// paramHeadersOf returns tool's annotated arguments. A tool not in the
// cached list has it read again once (the list may have changed); a list
// that cannot be read checks nothing: the call itself fails then.
func (ep *endpoint) paramHeadersOf(ctx context.Context, tool string) paramHeaders {
	ht := ep.p.headerTools(ep.cfg.Name)
	ht.mu.Lock()
	ph, ok := ht.byTool[tool]
	fresh := time.Since(ht.fetched) < headerToolsTTL
	ht.mu.Unlock()
	if ok && fresh {
		return ph
	}
	// Read outside the lock: the other calls use the list they have.
	list, err := ep.p.opts.Deck.Tools(ctx, ep.ref(), false)
	if err != nil {
		return nil
	}
	byTool := make(map[string]paramHeaders, len(list.Tools))
	for _, t := range list.Tools {
		ph := paramHeaders{} // every tool, so that one without is not read again
		for _, a := range t.Arguments {
			if a.Header != "" {
				ph[a.Name] = a.Header
			}
		}
		byTool[t.Name] = ph
	}
	ht.mu.Lock()
	ht.byTool, ht.fetched = byTool, time.Now()
	ht.mu.Unlock()
	return byTool[tool]
}

// agentHeadersKey holds, in a request's context, the HTTP headers of an
// agent's tools/call: only a call over HTTP has its Mcp-Param-* checked.
type agentHeadersKey struct{}

func withAgentHeaders(ctx context.Context, h http.Header) context.Context {
	return context.WithValue(ctx, agentHeadersKey{}, h)
}

// checkParamHeaders refuses, with the spec's error, a tools/call over HTTP
// whose Mcp-Param-* headers do not match its arguments. Agents older than
// 2026-07-28 send no standard headers and are not checked, as go-sdk's
// server does not check them.
func (ep *endpoint) checkParamHeaders(ctx context.Context, id json.RawMessage, tool string, arguments json.RawMessage) *response {
	h, ok := ctx.Value(agentHeadersKey{}).(http.Header)
	if !ok || h.Get("Mcp-Protocol-Version") < wire.ProtocolVersion {
		return nil
	}
	ph := ep.paramHeadersOf(ctx, tool)
	if len(ph) == 0 {
		return nil
	}
	var args map[string]json.RawMessage
	// Arguments that are not an object: every header is for an absent one.
	_ = json.Unmarshal(arguments, &args)
	// In order: the same request gets the same error.
	for _, path := range slices.Sorted(maps.Keys(ph)) {
		name := ph[path]
		if why := mismatch(h.Get("Mcp-Param-"+name), args, path); why != "" {
			return fail(id, wire.CodeHeaderMismatch, fmt.Sprintf(
				"header mismatch: Mcp-Param-%s %s %q; send each x-mcp-header argument of %s as its Mcp-Param-* header, with the argument's value", name, why, path, tool))
		}
	}
	return nil
}

// mismatch says how header fails to match the argument at path ("": it
// matches), by SEP-2243's rules: an absent or null argument has no
// header; a string is itself, a boolean true or false, an integer its
// number; non-ASCII goes as =?base64?…?=.
func mismatch(header string, args map[string]json.RawMessage, path string) string {
	raw, ok := lookup(args, path)
	if !ok || string(raw) == "null" {
		if header != "" {
			return "is sent for the absent argument"
		}
		return ""
	}
	if header == "" {
		return "is missing for the argument"
	}
	got, ok := decodeHeader(header)
	if !ok {
		return "is not valid =?base64?…?= for the argument"
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return "cannot be compared with the argument"
	}
	switch v := v.(type) {
	case string:
		ok = got == v
	case bool:
		ok = got == strconv.FormatBool(v)
	case float64:
		n, err := strconv.ParseFloat(got, 64)
		ok = err == nil && v == math.Trunc(v) && n == v
	default:
		return "names an argument that is not a string, integer or boolean:"
	}
	if !ok {
		return "differs from the argument"
	}
	return ""
}

// lookup finds the argument at a path of property names joined by dots.
func lookup(args map[string]json.RawMessage, path string) (json.RawMessage, bool) {
	if raw, ok := args[path]; ok {
		return raw, true
	}
	name, rest, nested := strings.Cut(path, ".")
	raw, ok := args[name]
	if !ok || !nested {
		return nil, false
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil {
		return nil, false
	}
	return lookup(obj, rest)
}

// decodeHeader decodes the =?base64?…?= form of a header value.
func decodeHeader(v string) (string, bool) {
	inner, ok := strings.CutPrefix(v, "=?base64?")
	if !ok {
		return v, true
	}
	inner, ok = strings.CutSuffix(inner, "?=")
	if !ok {
		return v, true
	}
	b, err := base64.StdEncoding.DecodeString(inner)
	return string(b), err == nil
}
