package demo

import (
	"context"
	"fmt"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// HeaderTool is the demo tool whose arguments travel as headers too:
// region and priority are annotated with x-mcp-header (SEP-2243), so a
// client must send them as Mcp-Param-Region and Mcp-Param-Priority. Over
// HTTP, go-sdk's server refuses a tools/call whose headers are missing or
// differ from the arguments (400, -32020) before the tool runs; the tool
// reports the headers it saw, so a client can be checked against them.
const HeaderTool = "deploy"

type deployIn struct {
	Region   string `json:"region" jsonschema:"where to deploy; also sent as the Mcp-Param-Region header"`
	Priority int    `json:"priority,omitempty" jsonschema:"0 (lowest) to 9; also sent as the Mcp-Param-Priority header"`
}

func (s *Server) addHeaderTool() {
	mcp.AddTool(s.mcp, &mcp.Tool{Name: HeaderTool, Description: "Deploys to a region; its arguments travel as Mcp-Param-* headers too.",
		InputSchema: schema[deployIn](func(p map[string]*jsonschema.Schema) {
			p["region"].MinLength = ptr(1)
			p["region"].Extra = map[string]any{"x-mcp-header": "Region"}
			p["priority"].Minimum, p["priority"].Maximum = ptr(0.0), ptr(9.0)
			p["priority"].Extra = map[string]any{"x-mcp-header": "Priority"}
		})}, s.deploy)
	s.taskOnly[HeaderTool] = nil
}

func (s *Server) deploy(ctx context.Context, req *mcp.CallToolRequest, in deployIn) (*mcp.CallToolResult, any, error) {
	seen := "none (stdio)"
	if req.Extra != nil && req.Extra.Header != nil {
		h := req.Extra.Header
		seen = fmt.Sprintf("Mcp-Param-Region=%s Mcp-Param-Priority=%s", h.Get("Mcp-Param-Region"), h.Get("Mcp-Param-Priority"))
	}
	report(ctx, "deploying to "+in.Region, 0)
	if err := s.wait(ctx, 500*time.Millisecond); err != nil {
		return nil, nil, err
	}
	return text(fmt.Sprintf("deployed to %s at priority %d; headers seen: %s", in.Region, in.Priority, seen)), nil, nil
}
