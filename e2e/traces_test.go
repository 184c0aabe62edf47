package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/internal/clitest"
	"github.com/taskdeck/taskdeck/internal/jaegertest"
	"github.com/taskdeck/taskdeck/internal/nodetest"
	"github.com/taskdeck/taskdeck/tracing"
)

// traceEnv is the OTEL_* environment that sends a deck's spans to j, in
// batches every 100 ms (not the SDK's 5 s, which a test would wait out).
func traceEnv(j *jaegertest.Jaeger, protocol string) []string {
	endpoint := j.OTLPHTTP
	if protocol == "grpc" {
		endpoint = j.OTLPGRPC
	}
	return []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL=" + protocol,
		"OTEL_SERVICE_NAME=taskdeck-e2e", "OTEL_BSP_SCHEDULE_DELAY=100"}
}

// stop sends SIGTERM and waits until the process has exited (its spans
// sent on the way out).
func (p *proc) stop(t *testing.T) {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM) // an error means it has already ended
	clitest.WaitFor(t, "taskdeck to exit after SIGTERM", p.exited)
}

// TestTraceAcrossRestart: a task launched under one `serve`, stopped
// while it waits for input, and answered under the next `serve` (two
// processes of the real binary) is one trace in a real Jaeger: the task's
// span, from its intent to its end, emitted by the second process, and
// the call, the polls of both processes and the answer, each linked to
// it, never its child. Once over http/protobuf, once over gRPC.
func TestTraceAcrossRestart(t *testing.T) {
	for _, protocol := range []string{"http/protobuf", "grpc"} {
		t.Run(protocol, func(t *testing.T) {
			t.Parallel()
			j := jaegertest.Start(t)
			demo := startDemo(t, "127.0.0.1:0", "--no-push") // polled
			d := newDeck(t)
			d.writeConfig(fmt.Sprintf(`{"mcpServers":{"demo":{"url":%q}}}`, demo.url))
			d.env = append(d.env, traceEnv(j, protocol)...)

			first := d.start("serve")
			clitest.WaitFor(t, "serve to own the store", func() bool { return strings.Contains(first.Stderr.String(), "ctrl+c stops") })
			id := clitest.OnlyID(t, d.run("call", "--server", "demo", "approve", "--args", `{"action":"deploy"}`).Must(t, 0))
			d.waitStatus(id, "input_required")
			first.stop(t)

			second := d.start("serve")
			clitest.WaitFor(t, "serve to own the store", func() bool { return strings.Contains(second.Stderr.String(), "ctrl+c stops") })
			d.run("answer", id, "approve-1", approveAnswer).Must(t, 0)
			d.waitStatus(id, "completed")
			second.stop(t)

			task := tracing.TaskSpan(id)
			traceID, spanID := task.TraceID().String(), task.SpanID().String()
			var tr *jaegertest.Trace
			var taskSpan jaegertest.Span
			clitest.WaitFor(t, "Jaeger to hold the task's span", func() bool {
				var err error
				tr, err = j.Trace(traceID)
				if err != nil || tr == nil {
					return false
				}
				i := slices.IndexFunc(tr.Spans, func(s jaegertest.Span) bool { return s.SpanID == spanID })
				if i < 0 {
					return false
				}
				taskSpan = tr.Spans[i]
				return true
			})
			if taskSpan.OperationName != "task" || taskSpan.Tag("record") != id || taskSpan.Tag("status") != "completed" || len(taskSpan.References) != 0 {
				t.Fatalf("the task's span: %+v", taskSpan)
			}
			if p := tr.Processes[taskSpan.ProcessID]; p.ServiceName != "taskdeck-e2e" {
				t.Fatalf("the task's span comes from service %q, want OTEL_SERVICE_NAME's taskdeck-e2e", p.ServiceName)
			}
			pids := map[string]bool{}
			ops := map[string]int{}
			for _, s := range tr.Spans {
				if s.SpanID == spanID {
					continue
				}
				if !s.Links(traceID, spanID) || s.Parent() != "" {
					t.Fatalf("span %s (%s) is not a root linked to the task's span: %+v", s.SpanID, s.OperationName, s.References)
				}
				if s.Tag("record") != id || s.Tag("server") != "demo" {
					t.Fatalf("span %s names record %q on %q, want %s on demo", s.OperationName, s.Tag("record"), s.Tag("server"), id)
				}
				if s.StartTime < taskSpan.StartTime || s.StartTime > taskSpan.StartTime+taskSpan.Duration {
					t.Fatalf("span %s starts at %d µs, outside the task's [%d, +%d]", s.OperationName, s.StartTime, taskSpan.StartTime, taskSpan.Duration)
				}
				ops[s.OperationName]++
				if s.OperationName == tracing.OpPoll {
					pids[tr.ProcessTag(s, "process.pid")] = true
				}
			}
			if ops[tracing.OpCall] != 1 || ops[tracing.OpAnswer] != 1 || ops[tracing.OpPoll] < 2 {
				t.Fatalf("the trace's linked spans: %v; want one tools/call, one tasks/update and polls", ops)
			}
			if len(pids) != 2 || pids[""] {
				t.Fatalf("the polls come from processes %v; want both serves'", pids)
			}
			if got := time.Duration(taskSpan.Duration) * time.Microsecond; got <= 0 {
				t.Fatalf("the task's span lasts %s", got)
			}
		})
	}
}

// TestTraceFromTypeScriptClient: the official TypeScript client calls a
// tool through `serve --proxy` with a traceparent in the call's _meta
// (SEP-414) and its HTTP headers: in a real Jaeger, taskdeck's tools/call span is the child of
// the client's span, in the client's trace, and linked to the task's
// span. A traceparent that does not parse is ignored: that call's span is
// a root in its task's trace.
func TestTraceFromTypeScriptClient(t *testing.T) {
	t.Parallel()
	dir := nodetest.Install(t, filepath.Join("..", "proxy", "testdata", "agent"), "agent.mjs")
	j := jaegertest.Start(t)
	srv := startDemo(t, "127.0.0.1:0")
	d := newDeck(t)
	d.writeConfig(fmt.Sprintf(`{"mcpServers":{"demo":{"url":%q}},"agents":{"e2e":{"token":"${E2E_AGENT_TOKEN}","servers":["demo"]}}}`, srv.url))
	const token = "e2e-agent-token-0123456789abcdef"
	d.env = append(append(d.env, "E2E_AGENT_TOKEN="+token), traceEnv(j, "http/protobuf")...)
	owner, base := d.serveProxy()

	// call runs the agent's held call of sleep with traceparent tp and
	// returns the record it made.
	call := func(tp string) string {
		t.Helper()
		before := d.lsByID()
		cmd := exec.Command("node", "agent.mjs", base+"/mcp/demo", "hold", "sleep", `{"seconds":1}`)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "TASKDECK_AGENT_TOKEN="+token, "TASKDECK_TRACEPARENT="+tp)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("the agent failed: %v\n%s", err, out)
		}
		for id := range d.lsByID() {
			if _, ok := before[id]; !ok {
				return id
			}
		}
		t.Fatalf("the agent's call left no record:\n%s", out)
		return ""
	}
	const agentTrace, agentSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	id := call("00-" + agentTrace + "-" + agentSpan + "-01")
	bad := call("00-" + agentTrace + "-not-a-span-id-01")
	owner.stop(t) // its spans go out on the way

	// callSpan waits for the tools/call span of record rec in trace.
	callSpan := func(trace, rec string) jaegertest.Span {
		t.Helper()
		var found jaegertest.Span
		clitest.WaitFor(t, "Jaeger to hold the tools/call span of "+rec, func() bool {
			tr, err := j.Trace(trace)
			if err != nil || tr == nil {
				return false
			}
			i := slices.IndexFunc(tr.Spans, func(s jaegertest.Span) bool {
				return s.OperationName == tracing.OpCall && s.Tag("record") == rec
			})
			if i >= 0 {
				found = tr.Spans[i]
			}
			return i >= 0
		})
		return found
	}
	task := tracing.TaskSpan(id)
	s := callSpan(agentTrace, id)
	if s.Parent() != agentSpan || !s.Links(task.TraceID().String(), task.SpanID().String()) {
		t.Fatalf("the client's call: parent %q (want the client's span %s), references %+v (want a link to the task's span %s)",
			s.Parent(), agentSpan, s.References, task.SpanID())
	}
	task = tracing.TaskSpan(bad)
	s = callSpan(task.TraceID().String(), bad)
	if s.Parent() != "" || !s.Links(task.TraceID().String(), task.SpanID().String()) {
		t.Fatalf("the call with a traceparent that does not parse: parent %q, references %+v; want a root linked to its task's span", s.Parent(), s.References)
	}
}

// TestLogFormatJSONNamesTrace: with traces on, a JSON log line about a
// task names its trace ("trace"), the id a trace backend finds it by; an
// OTLP endpoint where nothing listens costs the commands nothing but the
// spans.
func TestLogFormatJSONNamesTrace(t *testing.T) {
	t.Parallel()
	srv := startDemo(t, "127.0.0.1:0", "--no-push")
	d := newDeck(t)
	d.writeConfig(fmt.Sprintf(`{"mcpServers":{"demo":{"url":%q}}}`, srv.url))
	d.env = append(d.env, "OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:1") // refused: the spans are dropped
	id := clitest.OnlyID(t, d.run("--log-format", "json", "call", "--server", "demo", "sleep", "--args", `{"seconds":600}`).Must(t, 0))
	srv.p.kill()
	d.run("--log-format", "json", "-v", "get", id).Must(t, 0) // its refresh fails: the log says so

	raw, err := os.ReadFile(filepath.Join(d.dataDir, "taskdeck.log"))
	if err != nil {
		t.Fatal(err)
	}
	want := tracing.TaskSpan(id).TraceID().String()
	for line := range strings.Lines(string(raw)) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("a log line is not JSON: %v\n%s", err, line)
		}
		if rec["msg"] == "poll failed" && rec["record"] == id {
			if rec["trace"] != want {
				t.Fatalf("the poll's log line names trace %v, want the task's %s:\n%s", rec["trace"], want, line)
			}
			return
		}
	}
	t.Fatalf("no \"poll failed\" line naming record %s in the log:\n%s", id, raw)
}

// TestTraceEnvRefused: an OTEL_* setting taskdeck cannot honour is a
// usage error in one line, before the store is opened.
func TestTraceEnvRefused(t *testing.T) {
	t.Parallel()
	d := newDeck(t)
	d.env = append(d.env, "OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_PROTOCOL=http/json")
	r := d.run("ls").Must(t, exitUsage)
	clitest.OneErrorLine(t, r, `OTEL_EXPORTER_OTLP_PROTOCOL="http/json"`, "http/protobuf or grpc")
	d.env = append(d.env, "OTEL_EXPORTER_OTLP_PROTOCOL=grpc", "OTEL_TRACES_EXPORTER=zipkin")
	r = d.run("ls").Must(t, exitUsage)
	clitest.OneErrorLine(t, r, `OTEL_TRACES_EXPORTER="zipkin"`, "OTLP only")
}
