package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"

	"github.com/taskdeck/taskdeck/tracing"
)

// traced is ctx under the agent's span that the request names: the
// traceparent (and tracestate) of its _meta (SEP-414), else of the HTTP
// headers h (nil over stdio). A traceparent that does not parse is
// ignored: what the request starts is a trace of its own.
func traced(ctx context.Context, req *request, h http.Header) context.Context {
	if bytes.Contains(req.Params, []byte(`"traceparent"`)) {
		var p struct {
			Meta struct {
				Traceparent string `json:"traceparent"`
				Tracestate  string `json:"tracestate"`
			} `json:"_meta"`
		}
		if json.Unmarshal(req.Params, &p) == nil && p.Meta.Traceparent != "" {
			return tracing.Extract(ctx, func(key string) string {
				switch key {
				case "traceparent":
					return p.Meta.Traceparent
				case "tracestate":
					return p.Meta.Tracestate
				}
				return ""
			})
		}
	}
	if h != nil && h.Get("traceparent") != "" {
		return tracing.Extract(ctx, h.Get)
	}
	return ctx
}
