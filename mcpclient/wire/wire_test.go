package wire

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/model"
)

// Examples from shared/spec/tasks-extension.md (the "result" members).
const (
	specHandle = `{"resultType":"task",
  "taskId":"786512e2-9e0d-44bd-8f29-789f320fe840","status":"working",
  "statusMessage":"The operation is now in progress.",
  "createdAt":"2025-11-25T10:30:00Z","lastUpdatedAt":"2025-11-25T10:40:00Z",
  "ttlMs":60000,"pollIntervalMs":5000}`

	specGetWorking = `{"resultType":"complete","taskId":"786512e2-9e0d-44bd-8f29-789f320fe840",
 "status":"working","createdAt":"2025-11-25T10:30:00Z","lastUpdatedAt":"2025-11-25T10:50:00Z",
 "ttlMs":3600000,"pollIntervalMs":5000}`

	specGetCompleted = `{"resultType":"complete","taskId":"786512e2-9e0d-44bd-8f29-789f320fe840",
 "status":"completed","createdAt":"2025-11-25T10:30:00Z","lastUpdatedAt":"2025-11-25T10:50:00Z",
 "ttlMs":3600000,"pollIntervalMs":5000,
 "result":{"content":[{"type":"text","text":"Hello, Luca!"}],"isError":false}}`

	specGetFailed = `{"resultType":"complete","taskId":"786512e2-9e0d-44bd-8f29-789f820fe840",
 "status":"failed","createdAt":"2025-11-25T10:30:00Z","lastUpdatedAt":"2025-11-25T10:40:00Z",
 "ttlMs":3600000,"statusMessage":"Tool execution failed: API rate limit exceeded",
 "error":{"code":-32603,"message":"API rate limit exceeded"}}`

	specInputRequests = `{"name":{"method":"elicitation/create","params":{"mode":"form",
  "message":"Please enter your name.","requestedSchema":{"type":"object",
  "properties":{"name":{"type":"string"}},"required":["name"]}}}}`
)

var specCreatedAt = time.Date(2025, 11, 25, 10, 30, 0, 0, time.UTC)

func mustInvalid(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		t.Fatal("no error")
	}
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("error %q does not wrap ErrInvalid", err)
	}
	if strings.ContainsAny(err.Error(), "\r\n") {
		t.Fatalf("error is not one line: %q", err)
	}
}

func TestDecodeCallResultComplete(t *testing.T) {
	cases := map[string]struct {
		raw     string
		isError bool
	}{
		"resultType complete": {`{"resultType":"complete","content":[{"type":"text","text":"Hello, Luca!"}],"isError":false}`, false},
		"resultType missing":  {`{"content":[{"type":"text","text":"Hello, Luca!"}]}`, false},
		"isError":             {`{"resultType":"complete","content":[{"type":"text","text":"no such file"}],"isError":true}`, true},
		"isError, legacy":     {`{"content":[],"isError":true}`, true},
		"with _meta":          {`{"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"x"}},"content":[]}`, false},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			out, err := DecodeCallResult(json.RawMessage(c.raw))
			if err != nil {
				t.Fatal(err)
			}
			if out.ResultType != ResultTypeComplete {
				t.Errorf("ResultType = %q", out.ResultType)
			}
			if out.IsError != c.isError {
				t.Errorf("IsError = %v", out.IsError)
			}
			if out.Task != nil || out.InputRequests != nil || out.RequestState != "" {
				t.Errorf("extra parts set: %+v", out)
			}
			var got, want any
			if err := json.Unmarshal(out.Result, &got); err != nil {
				t.Fatalf("Result is not JSON: %v", err)
			}
			_ = json.Unmarshal([]byte(c.raw), &want)
			gb, _ := json.Marshal(got)
			wb, _ := json.Marshal(want)
			if string(gb) != string(wb) {
				t.Errorf("Result = %s, want %s", out.Result, c.raw)
			}
		})
	}
}

func TestDecodeCallResultTaskHandle(t *testing.T) {
	out, err := DecodeCallResult(json.RawMessage(specHandle))
	if err != nil {
		t.Fatal(err)
	}
	if out.ResultType != ResultTypeTask || out.Task == nil || out.Result != nil || out.InputRequests != nil {
		t.Fatalf("outcome = %+v", out)
	}
	s := out.Task
	if s.TaskID != "786512e2-9e0d-44bd-8f29-789f320fe840" || s.Status != model.StatusWorking ||
		s.StatusMessage != "The operation is now in progress." || !s.CreatedAt.Equal(specCreatedAt) {
		t.Errorf("snapshot = %+v", s)
	}
	if s.TTLMs == nil || *s.TTLMs != 60000 || s.PollIntervalMs == nil || *s.PollIntervalMs != 5000 {
		t.Errorf("ttl/interval = %v/%v", s.TTLMs, s.PollIntervalMs)
	}
}

func taskJSON(t *testing.T, edit func(m map[string]any)) json.RawMessage {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(specHandle), &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDecodeCallResultTaskVariants(t *testing.T) {
	t.Run("ttlMs missing", func(t *testing.T) {
		out, err := DecodeCallResult(taskJSON(t, func(m map[string]any) { delete(m, "ttlMs") }))
		if err != nil {
			t.Fatal(err)
		}
		if out.Task.TTLMs != nil {
			t.Fatalf("ttl = %d, want none", *out.Task.TTLMs)
		}
	})
	t.Run("ttlMs null", func(t *testing.T) {
		out, err := DecodeCallResult(taskJSON(t, func(m map[string]any) { m["ttlMs"] = nil }))
		if err != nil {
			t.Fatal(err)
		}
		if out.Task.TTLMs != nil {
			t.Fatalf("ttl = %d, want none", *out.Task.TTLMs)
		}
	})
	t.Run("pollIntervalMs missing", func(t *testing.T) {
		out, err := DecodeCallResult(taskJSON(t, func(m map[string]any) { delete(m, "pollIntervalMs") }))
		if err != nil {
			t.Fatal(err)
		}
		if out.Task.PollIntervalMs != nil {
			t.Fatal("interval set")
		}
	})
	t.Run("statusMessage missing", func(t *testing.T) {
		out, err := DecodeCallResult(taskJSON(t, func(m map[string]any) { delete(m, "statusMessage") }))
		if err != nil || out.Task.StatusMessage != "" {
			t.Fatalf("out=%+v err=%v", out, err)
		}
	})
	t.Run("unknown extra fields", func(t *testing.T) {
		out, err := DecodeCallResult(taskJSON(t, func(m map[string]any) {
			m["_meta"] = map[string]any{"io.modelcontextprotocol/serverInfo": map[string]any{"name": "x"}}
			m["progress"] = 0.5
			m["vendor"] = map[string]any{"nested": []any{1, "two"}}
		}))
		if err != nil {
			t.Fatal(err)
		}
		if out.Task.TaskID == "" || out.Task.Status != model.StatusWorking {
			t.Fatalf("snapshot = %+v", out.Task)
		}
	})
	t.Run("seed status completed", func(t *testing.T) {
		out, err := DecodeCallResult(taskJSON(t, func(m map[string]any) { m["status"] = "completed" }))
		if err != nil || out.Task.Status != model.StatusCompleted {
			t.Fatalf("out=%+v err=%v", out, err)
		}
	})

	times := map[string]time.Time{
		"2025-11-25T10:30:00Z":             specCreatedAt,
		"2025-11-25T10:30:00.5Z":           specCreatedAt.Add(500 * time.Millisecond),
		"2025-11-25T10:30:00.123456789Z":   specCreatedAt.Add(123456789),
		"2025-11-25T12:30:00+02:00":        specCreatedAt,
		"2025-11-25T05:30:00.250-05:00":    specCreatedAt.Add(250 * time.Millisecond),
		"2025-11-25T10:30:00.000000+00:00": specCreatedAt,
	}
	for in, want := range times {
		t.Run("createdAt "+in, func(t *testing.T) {
			out, err := DecodeCallResult(taskJSON(t, func(m map[string]any) { m["createdAt"] = in }))
			if err != nil {
				t.Fatal(err)
			}
			if !out.Task.CreatedAt.Equal(want) {
				t.Fatalf("createdAt = %v, want %v", out.Task.CreatedAt, want)
			}
		})
	}
	for _, bad := range []string{"", "yesterday", "2025-11-25 10:30:00"} {
		t.Run("createdAt bad "+bad, func(t *testing.T) {
			// A bad time loses only the ttl backstop, never the handle.
			out, err := DecodeCallResult(taskJSON(t, func(m map[string]any) { m["createdAt"] = bad }))
			if err != nil {
				t.Fatal(err)
			}
			if !out.Task.CreatedAt.IsZero() {
				t.Fatalf("createdAt = %v", out.Task.CreatedAt)
			}
		})
	}
}

func TestDecodeCallResultTaskInvalid(t *testing.T) {
	for name, edit := range map[string]func(map[string]any){
		"unknown status":        func(m map[string]any) { m["status"] = "running" },
		"local status claimed":  func(m map[string]any) { m["status"] = "unknown" },
		"status missing":        func(m map[string]any) { delete(m, "status") },
		"taskId missing":        func(m map[string]any) { delete(m, "taskId") },
		"taskId empty":          func(m map[string]any) { m["taskId"] = "" },
		"ttlMs not a number":    func(m map[string]any) { m["ttlMs"] = "60000" },
		"status not a string":   func(m map[string]any) { m["status"] = 3 },
		"pollIntervalMs object": func(m map[string]any) { m["pollIntervalMs"] = map[string]any{} },
	} {
		t.Run(name, func(t *testing.T) {
			out, err := DecodeCallResult(taskJSON(t, edit))
			mustInvalid(t, err)
			if out != nil {
				t.Fatalf("outcome alongside an error: %+v", out)
			}
		})
	}
	// The task id is a bearer token: an error shows at most a prefix.
	_, err := DecodeCallResult(taskJSON(t, func(m map[string]any) { m["status"] = "running" }))
	if strings.Contains(err.Error(), "786512e2-9e0d") {
		t.Fatalf("error leaks the task id: %v", err)
	}
}

func TestDecodeCallResultInputRequired(t *testing.T) {
	t.Run("inputRequests and requestState", func(t *testing.T) {
		raw := `{"resultType":"input_required","inputRequests":` + specInputRequests + `,"requestState":"opaque-abc=="}`
		out, err := DecodeCallResult(json.RawMessage(raw))
		if err != nil {
			t.Fatal(err)
		}
		if out.ResultType != ResultTypeInputRequired || out.Task != nil || out.Result != nil {
			t.Fatalf("outcome = %+v", out)
		}
		if out.RequestState != "opaque-abc==" {
			t.Errorf("requestState = %q", out.RequestState)
		}
		req, ok := out.InputRequests["name"]
		if !ok || req.Method != "elicitation/create" || !strings.Contains(string(req.Params), "requestedSchema") {
			t.Errorf("inputRequests = %+v", out.InputRequests)
		}
	})
	t.Run("requestState only", func(t *testing.T) {
		out, err := DecodeCallResult(json.RawMessage(`{"resultType":"input_required","requestState":"s1"}`))
		if err != nil || out.RequestState != "s1" || out.InputRequests != nil {
			t.Fatalf("out=%+v err=%v", out, err)
		}
	})
	t.Run("inputRequests only", func(t *testing.T) {
		out, err := DecodeCallResult(json.RawMessage(`{"resultType":"input_required","inputRequests":` + specInputRequests + `}`))
		if err != nil || out.RequestState != "" || len(out.InputRequests) != 1 {
			t.Fatalf("out=%+v err=%v", out, err)
		}
	})
	for name, raw := range map[string]string{
		"neither":             `{"resultType":"input_required"}`,
		"null inputRequests":  `{"resultType":"input_required","inputRequests":null}`,
		"empty requestState":  `{"resultType":"input_required","requestState":""}`,
		"inputRequests array": `{"resultType":"input_required","inputRequests":[]}`,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := DecodeCallResult(json.RawMessage(raw))
			mustInvalid(t, err)
		})
	}
}

func TestDecodeCallResultInvalid(t *testing.T) {
	for name, raw := range map[string]string{
		"unknown resultType":    `{"resultType":"deferred","content":[]}`,
		"empty resultType":      `{"resultType":"","content":[]}`,
		"resultType wrong case": `{"resultType":"Task","taskId":"x","status":"working"}`,
		"resultType not string": `{"resultType":1}`,
		"not an object":         `[1,2]`,
		"a string":              `"complete"`,
		"null":                  `null`,
		"empty":                 ``,
		"truncated":             `{"resultType":"complete"`,
		"isError not a bool":    `{"content":[],"isError":"yes"}`,
	} {
		t.Run(name, func(t *testing.T) {
			out, err := DecodeCallResult(json.RawMessage(raw))
			mustInvalid(t, err)
			if out != nil {
				t.Fatalf("outcome alongside an error: %+v", out)
			}
		})
	}
}

func decodeGet(t *testing.T, raw string) (*model.Snapshot, error) {
	t.Helper()
	var r GetTaskResult
	if err := json.Unmarshal([]byte(raw), &r); err != nil {
		t.Fatalf("unmarshal GetTaskResult: %v", err)
	}
	return DecodeTask(&r)
}

func TestDecodeTaskResultType(t *testing.T) {
	for _, rt := range []string{`"complete"`, `"task"`, `""`} {
		t.Run(rt, func(t *testing.T) {
			raw := strings.Replace(specGetWorking, `"complete"`, rt, 1)
			s, err := decodeGet(t, raw)
			if err != nil {
				t.Fatal(err)
			}
			if s.Status != model.StatusWorking || s.TaskID != "786512e2-9e0d-44bd-8f29-789f320fe840" ||
				*s.TTLMs != 3600000 || *s.PollIntervalMs != 5000 || !s.CreatedAt.Equal(specCreatedAt) {
				t.Fatalf("snapshot = %+v", s)
			}
		})
	}
	t.Run("missing", func(t *testing.T) {
		raw := strings.Replace(specGetWorking, `"resultType":"complete",`, ``, 1)
		if _, err := decodeGet(t, raw); err != nil {
			t.Fatal(err)
		}
	})
	for _, rt := range []string{`"input_required"`, `"completed"`, `"bogus"`} {
		t.Run("reject "+rt, func(t *testing.T) {
			_, err := decodeGet(t, strings.Replace(specGetWorking, `"complete"`, rt, 1))
			mustInvalid(t, err)
		})
	}
}

func TestDecodeTaskCompleted(t *testing.T) {
	s, err := decodeGet(t, specGetCompleted)
	if err != nil {
		t.Fatal(err)
	}
	if s.Status != model.StatusCompleted || s.IsError {
		t.Fatalf("snapshot = %+v", s)
	}
	if string(s.Result) != `{"content":[{"type":"text","text":"Hello, Luca!"}],"isError":false}` {
		t.Fatalf("result = %s", s.Result)
	}

	// The spec's "task" variant, and a tool error, still completed.
	s, err = decodeGet(t, strings.NewReplacer(`"complete"`, `"task"`, `"isError":false`, `"isError":true`).Replace(specGetCompleted))
	if err != nil {
		t.Fatal(err)
	}
	if s.Status != model.StatusCompleted || !s.IsError {
		t.Fatalf("isError snapshot = %+v", s)
	}

	noResult := strings.Replace(specGetCompleted,
		`,
 "result":{"content":[{"type":"text","text":"Hello, Luca!"}],"isError":false}`, ``, 1)
	if strings.Contains(noResult, `"result"`) {
		t.Fatal("test fixture still has a result")
	}
	_, err = decodeGet(t, noResult)
	mustInvalid(t, err)

	for name, res := range map[string]string{"null": `null`, "string": `"done"`, "array": `[]`} {
		t.Run("result "+name, func(t *testing.T) {
			raw := strings.Replace(specGetCompleted, `{"content":[{"type":"text","text":"Hello, Luca!"}],"isError":false}`, res, 1)
			_, err := decodeGet(t, raw)
			mustInvalid(t, err)
		})
	}
}

func TestDecodeTaskFailed(t *testing.T) {
	s, err := decodeGet(t, specGetFailed)
	if err != nil {
		t.Fatal(err)
	}
	if s.Status != model.StatusFailed || s.Error == nil || s.Error.Code != -32603 || s.Error.Message != "API rate limit exceeded" {
		t.Fatalf("snapshot = %+v, error %+v", s, s.Error)
	}
	if s.StatusMessage != "Tool execution failed: API rate limit exceeded" {
		t.Errorf("message = %q", s.StatusMessage)
	}
	// The spec prints "task" on this example.
	if _, err := decodeGet(t, strings.Replace(specGetFailed, `"complete"`, `"task"`, 1)); err != nil {
		t.Fatal(err)
	}
	for name, raw := range map[string]string{
		"error missing": strings.Replace(specGetFailed, `,
 "error":{"code":-32603,"message":"API rate limit exceeded"}`, ``, 1),
		"error null": strings.Replace(specGetFailed, `{"code":-32603,"message":"API rate limit exceeded"}`, `null`, 1),
	} {
		t.Run(name, func(t *testing.T) {
			s, err := decodeGet(t, raw)
			if err != nil {
				t.Fatal(err)
			}
			if s.Status != model.StatusFailed || s.Error == nil || s.Error.Code != CodeInternal || s.Error.Message == "" {
				t.Fatalf("snapshot = %+v, error %+v", s, s.Error)
			}
		})
	}
	// Error data survives.
	s, err = decodeGet(t, strings.Replace(specGetFailed, `"message":"API rate limit exceeded"}`, `"message":"x","data":{"retryAfter":30}}`, 1))
	if err != nil || string(s.Error.Data) != `{"retryAfter":30}` {
		t.Fatalf("data = %s, err %v", s.Error.Data, err)
	}
}

func TestDecodeTaskInputRequired(t *testing.T) {
	inputs := `{
  "name":{"method":"elicitation/create","params":{"mode":"form","message":"Please enter your name.","requestedSchema":{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}}},
  "nomode":{"method":"elicitation/create","params":{"message":"Pick one","requestedSchema":{"type":"object","properties":{"c":{"type":"string","enum":["a","b"]}}},"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"x"}}}},
  "link":{"method":"elicitation/create","params":{"mode":"url","message":"Sign in","url":"https://example.com/auth"}},
  "sample":{"method":"sampling/createMessage","params":{"messages":[],"maxTokens":10}},
  "roots":{"method":"roots/list"},
  "vendor":{"method":"acme/askOracle","params":{"question":"why?"}}
}`
	raw := strings.Replace(specGetWorking, `"status":"working"`, `"status":"input_required","inputRequests":`+inputs, 1)
	s, err := decodeGet(t, raw)
	if err != nil {
		t.Fatal(err)
	}
	if s.Status != model.StatusInputRequired || len(s.InputRequests) != 6 {
		t.Fatalf("snapshot = %+v", s)
	}
	want := map[string]string{
		"name": "elicitation/create", "nomode": "elicitation/create", "link": "elicitation/create",
		"sample": "sampling/createMessage", "roots": "roots/list", "vendor": "acme/askOracle",
	}
	for k, m := range want {
		if got := s.InputRequests[k].Method; got != m {
			t.Errorf("%s: method %q, want %q", k, got, m)
		}
	}
	if p := string(s.InputRequests["nomode"].Params); strings.Contains(p, `"mode"`) || !strings.Contains(p, "related-task") {
		t.Errorf("params not kept verbatim: %s", p)
	}
	if p := string(s.InputRequests["vendor"].Params); p != `{"question":"why?"}` {
		t.Errorf("vendor params = %s", p)
	}
	if len(s.InputRequests["roots"].Params) != 0 {
		t.Errorf("roots params = %s", s.InputRequests["roots"].Params)
	}

	// Input requests outside input_required are not carried.
	raw = strings.Replace(specGetWorking, `"status":"working"`, `"status":"working","inputRequests":`+inputs, 1)
	s, err = decodeGet(t, raw)
	if err != nil || s.InputRequests != nil {
		t.Fatalf("working snapshot carries inputs: %+v, %v", s, err)
	}
}

func TestDecodeTaskOtherStatuses(t *testing.T) {
	s, err := decodeGet(t, strings.Replace(specGetWorking, `"status":"working"`, `"status":"cancelled"`, 1))
	if err != nil || s.Status != model.StatusCancelled {
		t.Fatalf("cancelled: %+v %v", s, err)
	}
	_, err = decodeGet(t, strings.Replace(specGetWorking, `"status":"working"`, `"status":"paused"`, 1))
	mustInvalid(t, err)
	_, err = decodeGet(t, strings.Replace(specGetWorking, `"taskId":"786512e2-9e0d-44bd-8f29-789f320fe840",`, ``, 1))
	mustInvalid(t, err)
	// Whole seconds and offsets on tasks/get too; a missing ttlMs is no lifetime.
	s, err = decodeGet(t, strings.NewReplacer(`"2025-11-25T10:30:00Z"`, `"2025-11-25T11:30:00.75+01:00"`, `"ttlMs":3600000,`, ``).Replace(specGetWorking))
	if err != nil || !s.CreatedAt.Equal(specCreatedAt.Add(750*time.Millisecond)) || s.TTLMs != nil {
		t.Fatalf("snapshot = %+v, %v", s, err)
	}
}

func TestNowString(t *testing.T) {
	at := time.Date(2026, 8, 1, 14, 0, 0, 500_000_000, time.FixedZone("x", 2*3600))
	if got := NowString(at); got != "2026-08-01T12:00:00.5Z" {
		t.Fatalf("NowString = %q", got)
	}
}

// Integral numbers are numbers however they are written (a JavaScript
// server's 500.0, 5e2); a fraction or a string is not a millisecond count.
func TestMillisecondsAcceptIntegralFloats(t *testing.T) {
	handle := func(poll, ttl string) json.RawMessage {
		return json.RawMessage(`{"resultType":"task","taskId":"t-1","status":"working","createdAt":"2025-11-25T10:30:00Z",` +
			`"lastUpdatedAt":"2025-11-25T10:30:00Z","ttlMs":` + ttl + `,"pollIntervalMs":` + poll + `}`)
	}
	for _, c := range []struct{ poll, ttl string }{{"500.0", "60000"}, {"5e2", "6e4"}, {"500", "60000.000"}, {"5.0E2", "6.0e+4"}} {
		out, err := DecodeCallResult(handle(c.poll, c.ttl))
		if err != nil {
			t.Fatalf("pollIntervalMs %s, ttlMs %s: %v", c.poll, c.ttl, err)
		}
		if *out.Task.PollIntervalMs != 500 || *out.Task.TTLMs != 60000 {
			t.Fatalf("pollIntervalMs %s, ttlMs %s decoded as %d, %d", c.poll, c.ttl, *out.Task.PollIntervalMs, *out.Task.TTLMs)
		}
		var got GetTaskResult
		if err := json.Unmarshal(handle(c.poll, c.ttl), &got); err != nil || *got.PollIntervalMs != 500 || *got.TTLMs != 60000 {
			t.Fatalf("tasks/get with pollIntervalMs %s, ttlMs %s: %v", c.poll, c.ttl, err)
		}
	}
	if out, err := DecodeCallResult(handle("9e12", "null")); err != nil || *out.Task.PollIntervalMs != 9e12 {
		t.Fatalf("pollIntervalMs 9e12: %+v, %v", out, err)
	}
	for _, bad := range []struct{ poll, ttl string }{{"500.5", "60000"}, {"500", `"x"`}, {"1e400", "1"}, {"9.3e18", "1"}, {"true", "1"}} {
		_, err := DecodeCallResult(handle(bad.poll, bad.ttl))
		mustInvalid(t, err)
	}
}
