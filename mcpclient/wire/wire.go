// Package wire holds the Tasks extension's (SEP-2663) wire types and the
// lenient decoders for what servers send. It is shared by the client and
// the demo server, and by nothing else.
package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
	"unicode"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/taskdeck/taskdeck/model"
)

// Protocol constants.
const (
	ExtensionID     = "io.modelcontextprotocol/tasks"
	ProtocolVersion = "2026-07-28"

	MethodGet    = "tasks/get"
	MethodUpdate = "tasks/update"
	MethodCancel = "tasks/cancel"

	ResultTypeComplete      = "complete"
	ResultTypeTask          = "task"
	ResultTypeInputRequired = "input_required"
)

// JSON-RPC error codes a tasks client must tell apart.
const (
	CodeInvalidParams      = jsonrpc.CodeInvalidParams // on tasks/*: the task is unknown, expired or purged
	CodeMethodNotFound     = jsonrpc.CodeMethodNotFound
	CodeInternal           = jsonrpc.CodeInternalError
	CodeHeaderMismatch     = -32020
	CodeMissingCapability  = -32021
	CodeUnsupportedVersion = -32022
	// Earlier drafts' numbers, still sent by some builds.
	LegacyCodeHeaderMismatch     = -32001
	LegacyCodeMissingCapability  = -32003
	LegacyCodeUnsupportedVersion = -32004
)

// Task is the extension's Task object. TTLMs is nullable and may be
// missing altogether; both mean "no known lifetime".
type Task struct {
	TaskID         string `json:"taskId"`
	Status         string `json:"status"`
	StatusMessage  string `json:"statusMessage,omitempty"`
	CreatedAt      string `json:"createdAt"`
	LastUpdatedAt  string `json:"lastUpdatedAt"`
	TTLMs          *Ms    `json:"ttlMs"`
	PollIntervalMs *Ms    `json:"pollIntervalMs,omitempty"`
}

// Ms is a count of milliseconds. It decodes any integral JSON number,
// however written: servers in JavaScript send 500.0 or 5e2 for 500.
type Ms int64

// UnmarshalJSON accepts integral numbers within int64 and nothing else.
func (m *Ms) UnmarshalJSON(b []byte) error {
	s := string(b)
	if s == "null" {
		return nil
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		*m = Ms(n)
		return nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f != math.Trunc(f) || f < math.MinInt64 || f >= math.MaxInt64 {
		return fmt.Errorf("want a whole number of milliseconds, got %.40s", s)
	}
	*m = Ms(f)
	return nil
}

func (m *Ms) int64() *int64 {
	if m == nil {
		return nil
	}
	v := int64(*m)
	return &v
}

// DetailedTask is a Task with its status-specific payload.
type DetailedTask struct {
	Task
	InputRequests map[string]model.InputRequest `json:"inputRequests,omitempty"`
	Result        json.RawMessage               `json:"result,omitempty"`
	Error         *model.RPCError               `json:"error,omitempty"`
}

// CreateTaskResult answers tools/call with a task handle (flat, not nested).
type CreateTaskResult struct {
	mcp.ResultBase
	ResultType string `json:"resultType"`
	Task
}

// GetTaskParams are the params of tasks/get.
type GetTaskParams struct {
	mcp.ParamsBase
	TaskID string `json:"taskId"`
}

// GetTaskResult answers tasks/get.
type GetTaskResult struct {
	mcp.ResultBase
	ResultType string `json:"resultType"`
	DetailedTask
}

// UpdateTaskParams are the params of tasks/update.
type UpdateTaskParams struct {
	mcp.ParamsBase
	TaskID         string                     `json:"taskId"`
	InputResponses map[string]json.RawMessage `json:"inputResponses"`
}

// CancelTaskParams are the params of tasks/cancel.
type CancelTaskParams struct {
	mcp.ParamsBase
	TaskID string `json:"taskId"`
}

// AckResult answers tasks/update and tasks/cancel.
type AckResult struct {
	mcp.ResultBase
	ResultType string `json:"resultType"`
}

// CallOutcome is a decoded tools/call result: exactly one of Result
// (complete), Task (a handle) or InputRequests (MRTR, before any task) is set.
type CallOutcome struct {
	ResultType    string
	Result        json.RawMessage // the whole CallToolResult
	IsError       bool
	Task          *model.Snapshot
	InputRequests map[string]model.InputRequest
	RequestState  string
}

// ErrInvalid marks a response that breaks the protocol.
var ErrInvalid = errors.New("invalid response from server")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// DecodeCallResult dispatches a raw tools/call result on resultType.
func DecodeCallResult(raw json.RawMessage) (*CallOutcome, error) {
	var head struct {
		ResultType    *string                       `json:"resultType"`
		IsError       bool                          `json:"isError"`
		InputRequests map[string]model.InputRequest `json:"inputRequests"`
		RequestState  string                        `json:"requestState"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return nil, invalid("tools/call result is not a JSON object: %v", err)
	}
	if !isObject(raw) { // null unmarshals into a struct without complaint
		return nil, invalid("tools/call result is not a JSON object")
	}
	rt := ResultTypeComplete // a missing resultType is a pre-2026 server's final result
	if head.ResultType != nil {
		rt = *head.ResultType
	}
	out := &CallOutcome{ResultType: rt}
	switch rt {
	case ResultTypeComplete:
		out.Result = Compact(raw)
		out.IsError = head.IsError
	case ResultTypeTask:
		var t Task
		if err := json.Unmarshal(raw, &t); err != nil {
			return nil, invalid("task handle: %v", err)
		}
		snap, err := t.snapshot()
		if err != nil {
			return nil, err
		}
		out.Task = snap
	case ResultTypeInputRequired:
		if head.InputRequests == nil && head.RequestState == "" {
			return nil, invalid("input_required result carries neither inputRequests nor requestState")
		}
		out.InputRequests = head.InputRequests
		out.RequestState = head.RequestState
	default:
		return nil, invalid("unknown resultType %q", rt)
	}
	return out, nil
}

// DecodeTask checks a tasks/get result and turns it into a snapshot. Both
// "complete" (the MUST) and "task" (printed by some spec examples) are
// accepted as resultType; dispatch is on status.
func DecodeTask(r *GetTaskResult) (*model.Snapshot, error) {
	switch r.ResultType {
	case ResultTypeComplete, ResultTypeTask, "":
	default:
		return nil, invalid("unknown resultType %q on tasks/get", r.ResultType)
	}
	snap, err := r.Task.snapshot()
	if err != nil {
		return nil, err
	}
	switch snap.Status {
	case model.StatusInputRequired:
		snap.InputRequests = r.InputRequests
	case model.StatusCompleted:
		if len(r.Result) == 0 || !isObject(r.Result) {
			return nil, invalid("completed task %s carries no result object", short(r.TaskID))
		}
		snap.Result = Compact(r.Result)
		var res struct {
			IsError bool `json:"isError"`
		}
		if err := json.Unmarshal(r.Result, &res); err != nil {
			return nil, invalid("completed task result is not an object: %v", err)
		}
		snap.IsError = res.IsError
	case model.StatusFailed:
		snap.Error = r.Error
		if snap.Error == nil {
			snap.Error = &model.RPCError{Code: CodeInternal, Message: "task failed (the server sent no error)"}
		}
	}
	return snap, nil
}

func (t Task) snapshot() (*model.Snapshot, error) {
	if t.TaskID == "" {
		return nil, invalid("task has no taskId")
	}
	st, ok := model.ServerStatus(t.Status)
	if !ok {
		return nil, invalid("task %s has unknown status %q", short(t.TaskID), t.Status)
	}
	s := &model.Snapshot{
		TaskID:         t.TaskID,
		Status:         st,
		StatusMessage:  t.StatusMessage,
		TTLMs:          t.TTLMs.int64(),
		PollIntervalMs: t.PollIntervalMs.int64(),
		ReceivedAt:     time.Now(), // decoded as it is read
	}
	// Tolerate what real servers send: a bad createdAt only loses the ttl
	// backstop, a bad lastUpdatedAt the ordering by the server's clock.
	if at, err := time.Parse(time.RFC3339Nano, t.CreatedAt); err == nil {
		s.CreatedAt = at
	}
	if at, err := time.Parse(time.RFC3339Nano, t.LastUpdatedAt); err == nil {
		s.LastUpdatedAt = at
	}
	return s, nil
}

// short keeps task ids (bearer tokens) out of messages: at most six
// characters, each unprintable one (a newline, an escape) shown as '?'.
func short(id string) string {
	r := []rune(id)
	tail := ""
	if len(r) > 6 {
		r, tail = r[:6], "…"
	}
	for i, c := range r {
		if !unicode.IsPrint(c) {
			r[i] = '?'
		}
	}
	return string(r) + tail
}

// isObject reports whether raw holds a JSON object (not null, which
// encoding/json accepts for any struct or json.RawMessage).
func isObject(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && raw[0] == '{'
}

// Compact is raw without insignificant space, or raw itself when it is
// not valid JSON.
func Compact(raw json.RawMessage) json.RawMessage {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return raw
	}
	return buf.Bytes()
}

// NowString formats a time as the protocol does.
func NowString(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
