package demo

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/taskdeck/taskdeck/mcpclient/wire"
)

// InstantTool finishes before its CreateTaskResult is sent, as a server
// that finishes at once does: the handle's seed status is already
// completed (or failed), without the result (or error), which only
// tasks/get carries (spec §11).
const InstantTool = "instant"

type instantIn struct {
	Text string `json:"text,omitempty" jsonschema:"the text of the result"`
	Mode string `json:"mode,omitempty" jsonschema:"result: the task completes; error: it fails with a JSON-RPC error"`
}

func (s *Server) addInstant() {
	mcp.AddTool(s.mcp, &mcp.Tool{Name: InstantTool, Description: "Runs as a task that has already ended when its handle is sent.",
		InputSchema: schema[instantIn](nil)}, s.instant)
	s.mcp.AddReceivingMiddleware(s.instantTask)
}

func (s *Server) instant(_ context.Context, _ *mcp.CallToolRequest, in instantIn) (*mcp.CallToolResult, any, error) {
	if in.Mode == "error" {
		return nil, nil, &jsonrpc.Error{Code: wire.CodeInternal, Message: "instant failure"}
	}
	return text("instant: " + in.Text), nil, nil
}

// instantTask runs the instant tool to its end inside its task, then
// answers with the task's handle. A client without the extension gets the
// plain result.
func (s *Server) instantTask(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		r, ok := req.(*mcp.CallToolRequest)
		if method != "tools/call" || !ok || r.Params == nil || r.Params.Name != InstantTool ||
			r.ProtocolVersion() < wire.ProtocolVersion || !wire.DeclaresExtension(r.Params.GetMeta()) {
			return next(ctx, method, req)
		}
		t, tctx, err := s.newTask()
		if err != nil {
			return nil, err
		}
		s.run(tctx, t, next, r)
		return &wire.CreateTaskResult{ResultType: wire.ResultTypeTask, Task: s.tasks.snapshot(t)}, nil
	}
}
