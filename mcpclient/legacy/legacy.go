// Package legacy holds the 2025-11-25 revision's task wire (SEP-1686):
// tasks are a capability of a sessioned protocol, a task-augmented
// tools/call answers {"task": {...}}, tasks/get reports the task alone and
// tasks/result returns the tool's result. The session plumbing is
// mcpclient's; this package only encodes and decodes.
package legacy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskdeck/taskdeck/mcpclient/wire"
	"github.com/taskdeck/taskdeck/model"
)

// Protocol constants of the 2025-11-25 revision.
const (
	ProtocolVersion = "2025-11-25"

	MethodGet    = "tasks/get"
	MethodResult = "tasks/result"
	MethodCancel = "tasks/cancel"
	MethodList   = "tasks/list"

	// RelatedTaskKey in a request's _meta names the task it belongs to.
	RelatedTaskKey = "io.modelcontextprotocol/related-task"
)

// Task is the revision's Task object: ttl and pollInterval in
// milliseconds, ttl null for "unlimited".
type Task struct {
	TaskID        string   `json:"taskId"`
	Status        string   `json:"status"`
	StatusMessage string   `json:"statusMessage,omitempty"`
	CreatedAt     string   `json:"createdAt"`
	LastUpdatedAt string   `json:"lastUpdatedAt"`
	TTL           *wire.Ms `json:"ttl"`
	PollInterval  *wire.Ms `json:"pollInterval,omitempty"`
}

// TaskParams are params.task of a task-augmented request.
type TaskParams struct {
	TTL int64 `json:"ttl,omitempty"`
}

// IDParams are the params of tasks/get, tasks/result and tasks/cancel.
type IDParams struct {
	mcp.ParamsBase
	TaskID string `json:"taskId"`
}

// ListParams are the params of tasks/list.
type ListParams struct {
	mcp.ParamsBase
	Cursor string `json:"cursor,omitempty"`
}

// Raw is any result, kept as the server sent it.
type Raw struct {
	mcp.ResultBase
	JSON json.RawMessage `json:"-"`
}

// UnmarshalJSON keeps the result whole.
func (r *Raw) UnmarshalJSON(b []byte) error {
	r.JSON = append(json.RawMessage(nil), b...)
	return nil
}

// MarshalJSON writes the result as it was sent.
func (r *Raw) MarshalJSON() ([]byte, error) {
	if r.JSON == nil {
		return []byte("{}"), nil
	}
	return r.JSON, nil
}

// DecodeCallResult decodes a tools/call result: a CreateTaskResult
// ({"task": {...}}) is a handle, anything else the tool's own result.
func DecodeCallResult(raw json.RawMessage) (*wire.CallOutcome, error) {
	if !isObject(raw) {
		return nil, fmt.Errorf("%w: tools/call result is not a JSON object", wire.ErrInvalid)
	}
	var head struct {
		Task       *json.RawMessage `json:"task"`
		ResultType *string          `json:"resultType"`
		IsError    bool             `json:"isError"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return nil, fmt.Errorf("%w: tools/call result: %v", wire.ErrInvalid, err)
	}
	if head.ResultType != nil {
		// A 2026-07-28 answer on a 2025-11-25 session.
		return nil, fmt.Errorf("%w: a 2026-07-28 result (resultType %q) on a 2025-11-25 session", wire.ErrInvalid, *head.ResultType)
	}
	if head.Task == nil {
		return &wire.CallOutcome{ResultType: wire.ResultTypeComplete, Result: wire.Compact(raw), IsError: head.IsError}, nil
	}
	snap, err := DecodeTask(*head.Task)
	if err != nil {
		return nil, err
	}
	return &wire.CallOutcome{ResultType: wire.ResultTypeTask, Task: snap}, nil
}

// DecodeTask decodes a Task object (tasks/get's result, or a
// CreateTaskResult's task) into a snapshot without result or error:
// those come from tasks/result.
func DecodeTask(raw json.RawMessage) (*model.Snapshot, error) {
	var t Task
	if !isObject(raw) {
		return nil, fmt.Errorf("%w: task is not a JSON object", wire.ErrInvalid)
	}
	if err := json.Unmarshal(raw, &t); err != nil {
		return nil, fmt.Errorf("%w: task: %v", wire.ErrInvalid, err)
	}
	if t.TaskID == "" {
		return nil, fmt.Errorf("%w: task has no taskId", wire.ErrInvalid)
	}
	st, ok := model.ServerStatus(t.Status)
	if !ok {
		return nil, fmt.Errorf("%w: task has unknown status %.40q", wire.ErrInvalid, t.Status)
	}
	s := &model.Snapshot{TaskID: t.TaskID, Protocol: ProtocolVersion, Status: st, StatusMessage: t.StatusMessage, ReceivedAt: time.Now()}
	if t.TTL != nil {
		v := int64(*t.TTL)
		s.TTLMs = &v
	}
	if t.PollInterval != nil {
		v := int64(*t.PollInterval)
		s.PollIntervalMs = &v
	}
	if at, err := time.Parse(time.RFC3339Nano, t.CreatedAt); err == nil {
		s.CreatedAt = at
	}
	if at, err := time.Parse(time.RFC3339Nano, t.LastUpdatedAt); err == nil {
		s.LastUpdatedAt = at
	}
	return s, nil
}

// DecodeList decodes a tasks/list result: its tasks and the next
// page's cursor ("" on the last page).
func DecodeList(raw json.RawMessage) ([]*model.Snapshot, string, error) {
	var r struct {
		Tasks      []json.RawMessage `json:"tasks"`
		NextCursor string            `json:"nextCursor"`
	}
	if !isObject(raw) || json.Unmarshal(raw, &r) != nil {
		return nil, "", fmt.Errorf("%w: tasks/list result is not a list of tasks", wire.ErrInvalid)
	}
	out := make([]*model.Snapshot, 0, len(r.Tasks))
	for _, t := range r.Tasks {
		snap, err := DecodeTask(t)
		if err != nil {
			return nil, "", err
		}
		out = append(out, snap)
	}
	return out, r.NextCursor, nil
}

// DecodeResult checks what tasks/result answered for a completed task:
// the tool's result object, and whether it is a tool error.
func DecodeResult(raw json.RawMessage) (json.RawMessage, bool, error) {
	var r struct {
		IsError bool `json:"isError"`
	}
	if !isObject(raw) || json.Unmarshal(raw, &r) != nil {
		return nil, false, fmt.Errorf("%w: tasks/result of a completed task is not a result object", wire.ErrInvalid)
	}
	return wire.Compact(raw), r.IsError, nil
}

// TaskSupport is a listed tool's execution.taskSupport: "forbidden"
// (also when the tool says nothing), "optional" or "required".
func TaskSupport(tool json.RawMessage) string {
	var t struct {
		Execution struct {
			TaskSupport string `json:"taskSupport"`
		} `json:"execution"`
	}
	_ = json.Unmarshal(tool, &t) // a tool that cannot be read is called plainly
	switch t.Execution.TaskSupport {
	case "optional", "required":
		return t.Execution.TaskSupport
	}
	return "forbidden"
}

// CallsAsTasks tells whether an initialize result's capabilities offer
// task-augmented tools/call (capabilities.tasks.requests.tools.call).
func CallsAsTasks(initResult json.RawMessage) bool {
	var r struct {
		Capabilities struct {
			Tasks *struct {
				Requests struct {
					Tools struct {
						Call *json.RawMessage `json:"call"`
					} `json:"tools"`
				} `json:"requests"`
			} `json:"tasks"`
		} `json:"capabilities"`
	}
	return json.Unmarshal(initResult, &r) == nil && r.Capabilities.Tasks != nil && r.Capabilities.Tasks.Requests.Tools.Call != nil
}

// Lists tells whether an initialize result offers tasks/list.
func Lists(initResult json.RawMessage) bool {
	var r struct {
		Capabilities struct {
			Tasks *struct {
				List *json.RawMessage `json:"list"`
			} `json:"tasks"`
		} `json:"capabilities"`
	}
	return json.Unmarshal(initResult, &r) == nil && r.Capabilities.Tasks != nil && r.Capabilities.Tasks.List != nil
}

// WithTask returns tools/call params with params.task set.
func WithTask(params json.RawMessage, task TaskParams) (json.RawMessage, error) {
	return setField(params, []string{"task"}, task)
}

// WithTasksCapability returns initialize params whose client
// capabilities include tasks: some servers refuse task-augmented calls
// from a client that does not declare it. It declares no task-augmented
// requests of its own (taskdeck runs no tasks for servers).
func WithTasksCapability(params json.RawMessage) (json.RawMessage, error) {
	return setField(params, []string{"capabilities", "tasks"}, struct{}{})
}

// setField sets the member at path of the JSON object raw.
func setField(raw json.RawMessage, path []string, v any) (json.RawMessage, error) {
	var m map[string]json.RawMessage
	if len(bytes.TrimSpace(raw)) > 0 {
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, err
		}
	}
	if m == nil {
		m = map[string]json.RawMessage{}
	}
	var b []byte
	var err error
	if len(path) == 1 {
		b, err = json.Marshal(v)
	} else {
		b, err = setField(m[path[0]], path[1:], v)
	}
	if err != nil {
		return nil, err
	}
	m[path[0]] = b
	return json.Marshal(m)
}

// RelatedTask is the task id a request's _meta names, "" when none.
func RelatedTask(meta map[string]any) string {
	rel, _ := meta[RelatedTaskKey].(map[string]any)
	id, _ := rel["taskId"].(string)
	return id
}

func isObject(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && raw[0] == '{'
}
