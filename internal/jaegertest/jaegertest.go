// Package jaegertest runs a real Jaeger v1.76 all-in-one (its `jaeger`
// program, built from its Go module by the tool module beside this file:
// .ci/run installs it) for a test: OTLP receivers (HTTP and gRPC), memory
// storage and the query API, each on a free loopback port. The test's
// cleanup stops it by its pid. Without the program it skips the test, or
// fails it when CI=true.
package jaegertest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/internal/testproc"
	"github.com/taskdeck/taskdeck/internal/waitfor"
)

// Jaeger is a running Jaeger.
type Jaeger struct {
	OTLPHTTP string // http://127.0.0.1:PORT, for OTEL_EXPORTER_OTLP_ENDPOINT
	OTLPGRPC string // http://127.0.0.1:PORT, for OTEL_EXPORTER_OTLP_ENDPOINT with grpc
	Query    string // http://127.0.0.1:PORT, the query API
}

// Bin finds the jaeger program: $TASKDECK_JAEGER, jaeger on PATH, or in
// $(go env GOPATH)/bin, where .ci/run installs it; else it skips the test
// (fails it under CI=true).
func Bin(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("TASKDECK_JAEGER"); p != "" {
		return p
	}
	if p, err := exec.LookPath("jaeger"); err == nil {
		return p
	}
	if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		p := filepath.Join(strings.TrimSpace(string(out)), "bin", "jaeger")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	msg := "no jaeger program (install it as .ci/run does: go -C internal/jaegertest/tool install github.com/jaegertracing/jaeger/cmd/jaeger)"
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true but %s", msg)
	}
	t.Skip(msg)
	return ""
}

const config = `service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  jaeger_query:
    storage:
      traces: memstore
    http:
      endpoint: %s
    grpc:
      endpoint: %s
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 10000
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: %s
      http:
        endpoint: %s
processors:
  batch:
    timeout: 100ms
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
`

// Start runs Jaeger and waits until its query API answers.
func Start(t testing.TB) *Jaeger {
	t.Helper()
	bin := Bin(t)
	confPath := filepath.Join(t.TempDir(), "jaeger.yaml")
	// query http, query grpc, otlp grpc, otlp http
	addrs := testproc.ServeOnPorts(t, 4, "jaeger", func(addrs []string) (*exec.Cmd, string) {
		if err := os.WriteFile(confPath, fmt.Appendf(nil, config, addrs[0], addrs[1], addrs[2], addrs[3]), 0o644); err != nil {
			t.Fatal(err)
		}
		return exec.Command(bin, "--config", "file:"+confPath), "http://" + addrs[0] + "/api/services"
	})
	return &Jaeger{Query: "http://" + addrs[0], OTLPGRPC: "http://" + addrs[2], OTLPHTTP: "http://" + addrs[3]}
}

// Span is a span as the query API shows it.
type Span struct {
	TraceID       string `json:"traceID"`
	SpanID        string `json:"spanID"`
	OperationName string `json:"operationName"`
	References    []Ref  `json:"references"`
	StartTime     int64  `json:"startTime"` // µs since the epoch
	Duration      int64  `json:"duration"`  // µs
	Tags          []struct {
		Key   string `json:"key"`
		Value any    `json:"value"`
	} `json:"tags"`
	ProcessID string `json:"processID"`
}

// Ref is a span's reference to another: its parent (CHILD_OF) or a link
// (FOLLOWS_FROM).
type Ref struct {
	RefType string `json:"refType"`
	TraceID string `json:"traceID"`
	SpanID  string `json:"spanID"`
}

// Links tells whether s is linked to the span (trace, span).
func (s Span) Links(trace, span string) bool {
	return slices.Contains(s.References, Ref{RefType: "FOLLOWS_FROM", TraceID: trace, SpanID: span})
}

// Parent is the span's parent ("" for a root).
func (s Span) Parent() string {
	for _, r := range s.References {
		if r.RefType == "CHILD_OF" {
			return r.SpanID
		}
	}
	return ""
}

// Tag is the value of the span's tag key ("" when it has none).
func (s Span) Tag(key string) string {
	for _, t := range s.Tags {
		if t.Key == key {
			return fmt.Sprint(t.Value)
		}
	}
	return ""
}

// Trace is a trace as the query API shows it.
type Trace struct {
	TraceID   string `json:"traceID"`
	Spans     []Span `json:"spans"`
	Processes map[string]struct {
		ServiceName string `json:"serviceName"`
		Tags        []struct {
			Key   string `json:"key"`
			Value any    `json:"value"`
		} `json:"tags"`
	} `json:"processes"`
}

// ProcessTag is the value of key among the tags of the process (the
// resource) that made s.
func (tr Trace) ProcessTag(s Span, key string) string {
	for _, t := range tr.Processes[s.ProcessID].Tags {
		if t.Key == key {
			return fmt.Sprint(t.Value)
		}
	}
	return ""
}

// Trace fetches the trace id (32 hex digits); nil when Jaeger has none.
func (j *Jaeger) Trace(id string) (*Trace, error) {
	ctx, cancel := context.WithTimeout(context.Background(), waitfor.Scale(10*time.Second))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, j.Query+"/api/traces/"+id, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return nil, nil
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("trace %s: HTTP %d", id, resp.StatusCode)
	}
	var body struct {
		Data []Trace `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, fmt.Errorf("trace %s: %w", id, err)
	}
	if len(body.Data) == 0 {
		return nil, nil
	}
	return &body.Data[0], nil
}
