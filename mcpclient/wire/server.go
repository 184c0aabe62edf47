package wire

import (
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/taskdeck/taskdeck/model"
)

// Server-side helpers, used by the demo server.

// DeclaresExtension reports whether a request's _meta declares the tasks
// extension in its per-request client capabilities.
func DeclaresExtension(meta map[string]any) bool {
	// Round-trip through JSON: in-process callers may put typed values there.
	raw, err := json.Marshal(meta[mcp.MetaKeyClientCapabilities])
	if err != nil {
		return false
	}
	var caps struct {
		Extensions map[string]json.RawMessage `json:"extensions"`
	}
	if json.Unmarshal(raw, &caps) != nil {
		return false
	}
	v, ok := caps.Extensions[ExtensionID]
	return ok && string(v) != "null"
}

// ErrMissingCapability is -32021 naming the tasks extension. Its data is
// built by hand: mcp.MissingRequiredClientCapabilityData would also claim
// "roots":{} (go-sdk marshals the empty Roots struct).
func ErrMissingCapability() *jsonrpc.Error {
	return &jsonrpc.Error{
		Code:    CodeMissingCapability,
		Message: "Missing required client capability",
		Data:    json.RawMessage(`{"requiredCapabilities":{"extensions":{"` + ExtensionID + `":{}}}}`),
	}
}

// ErrTaskNotFound is the -32602 for an unknown, expired or purged task.
func ErrTaskNotFound() *jsonrpc.Error {
	return &jsonrpc.Error{Code: CodeInvalidParams, Message: "Failed to retrieve task: Task not found"}
}

// InputRequestMap is a task's inputRequests in wire form.
type InputRequestMap = map[string]model.InputRequest

// InputRequests converts go-sdk's typed input requests to their wire form.
func InputRequests(m mcp.InputRequestMap) (InputRequestMap, error) {
	raw, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encoding input requests: %w", err)
	}
	var out InputRequestMap
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Errorf("decoding input requests: %w", err)
	}
	return out, nil
}

// RPCError turns a JSON-RPC error into a failed task's error object.
func RPCError(e *jsonrpc.Error) *model.RPCError {
	return &model.RPCError{Code: e.Code, Message: e.Message, Data: e.Data}
}
