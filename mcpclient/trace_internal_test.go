package mcpclient

import (
	"context"
	"encoding/json"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

// traceMeta adds the span's traceparent to any _meta object, and leaves
// one it cannot add to (not an object, no span) as it was.
func TestTraceMeta(t *testing.T) {
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled})
	ctx := trace.ContextWithSpanContext(context.Background(), sc)
	const tp = "00-01000000000000000000000000000000-0200000000000000-01"
	for _, meta := range []string{`{}`, `{ }`, ``, `null`, `{"io.modelcontextprotocol/protocolVersion":"2026-07-28","x":{"y":[1,2]}}`} {
		out := traceMeta(ctx, json.RawMessage(meta))
		var m map[string]any
		if err := json.Unmarshal(out, &m); err != nil || m["traceparent"] != tp {
			t.Errorf("_meta %q became %s (%v); want it with traceparent %s", meta, out, err, tp)
		}
		if meta != "" && meta != "null" && meta != "{}" && meta != "{ }" && len(m) != 3 {
			t.Errorf("_meta %q lost keys: %s", meta, out)
		}
	}
	if out := traceMeta(ctx, json.RawMessage(`[1]`)); string(out) != `[1]` {
		t.Errorf("a _meta that is not an object became %s", out)
	}
	if out := traceMeta(context.Background(), json.RawMessage(`{"a":1}`)); string(out) != `{"a":1}` {
		t.Errorf("with no span, _meta became %s", out)
	}
}
