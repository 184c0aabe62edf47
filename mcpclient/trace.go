package mcpclient

import (
	"context"
	"encoding/json"
	"strings"

	"go.opentelemetry.io/otel/trace"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/taskdeck/taskdeck/tracing"
)

// tracedMethod tells the requests that carry the caller's trace context to
// the server in _meta (SEP-414): tools/call and every tasks/*.
func tracedMethod(method string) bool {
	return method == "tools/call" || strings.HasPrefix(method, "tasks/")
}

// withTrace is req with the traceparent of ctx's span in its _meta, or req
// itself when ctx has no span (tracing off, no agent's context).
func withTrace(ctx context.Context, req *jsonrpc.Request) *jsonrpc.Request {
	if !tracedMethod(req.Method) || !trace.SpanContextFromContext(ctx).IsValid() {
		return req
	}
	var params map[string]json.RawMessage
	if json.Unmarshal(req.Params, &params) != nil || params == nil {
		return req // not an object: the server says what is wrong with it
	}
	params["_meta"] = traceMeta(ctx, params["_meta"])
	raw, err := json.Marshal(params)
	if err != nil {
		return req
	}
	return &jsonrpc.Request{ID: req.ID, Method: req.Method, Params: raw, Extra: req.Extra}
}

// traceMeta is the _meta object meta with the traceparent (and tracestate)
// of ctx's span set, or meta itself when ctx has none.
func traceMeta(ctx context.Context, meta json.RawMessage) json.RawMessage {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return meta
	}
	m := map[string]json.RawMessage{}
	if len(meta) > 0 && json.Unmarshal(meta, &m) != nil {
		return meta
	}
	if m == nil {
		m = map[string]json.RawMessage{}
	}
	tracing.Inject(ctx, func(k, v string) { m[k], _ = json.Marshal(v) })
	out, err := json.Marshal(m)
	if err != nil {
		return meta
	}
	return out
}
