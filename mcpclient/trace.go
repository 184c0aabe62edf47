package mcpclient

import (
	"bytes"
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
// of ctx's span added, or meta itself when ctx has none. The keys are
// spliced in, not re-encoded: a poll's _meta is go-sdk's, which has none
// of them.
func traceMeta(ctx context.Context, meta json.RawMessage) json.RawMessage {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return meta
	}
	var kv []byte
	tracing.Inject(ctx, func(k, v string) {
		key, _ := json.Marshal(k) // strings always encode
		val, _ := json.Marshal(v)
		kv = append(append(append(append(kv, ','), key...), ':'), val...)
	})
	body := bytes.TrimSpace(meta)
	switch {
	case len(kv) == 0:
		return meta
	case len(body) == 0 || string(body) == "null":
		body = []byte("{}")
	case body[0] != '{' || body[len(body)-1] != '}':
		return meta // not an object: the server says what is wrong with it
	}
	inner := bytes.TrimSpace(body[1 : len(body)-1])
	out := make([]byte, 0, len(body)+len(kv)+1)
	out = append(append(out, '{'), inner...)
	if len(inner) == 0 {
		kv = kv[1:] // no comma before the first key
	}
	return append(append(out, kv...), '}')
}
