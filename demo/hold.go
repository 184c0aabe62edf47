package demo

import (
	"context"
	"fmt"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// HoldTool (Options.Hold) runs as a task that changes only when
// Server.Step is called: a test or benchmark chooses the moment of each
// change, and Server.OnChange tells it when the server made it. The task
// is ready for its first step once its statusMessage is "step 0 of N".
const HoldTool = "hold"

type holdIn struct {
	Steps int `json:"steps,omitempty" jsonschema:"how many steps it waits for before it completes"`
}

func (s *Server) addHold() {
	mcp.AddTool(s.mcp, &mcp.Tool{Name: HoldTool, Description: "Works until the server is told to step it (tests and benchmarks); completes after its last step.",
		InputSchema: schema[holdIn](func(p map[string]*jsonschema.Schema) {
			p["steps"].Minimum, p["steps"].Maximum = ptr(1.0), ptr(10000.0)
		})}, s.hold)
	s.taskOnly[HoldTool] = nil
}

func (s *Server) hold(ctx context.Context, _ *mcp.CallToolRequest, in holdIn) (*mcp.CallToolResult, any, error) {
	r, ok := ctx.Value(runningKey{}).(*running)
	if !ok {
		return nil, nil, errNoTask
	}
	steps := max(in.Steps, 1)
	ch := make(chan struct{}, 1)
	s.mu.Lock()
	s.holds[r.t.id] = ch
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.holds, r.t.id)
		s.mu.Unlock()
	}()
	report(ctx, fmt.Sprintf("step 0 of %d", steps), 0)
	for i := 1; i <= steps; i++ {
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
		if i < steps {
			report(ctx, fmt.Sprintf("step %d of %d", i, steps), 0)
		}
	}
	return text(fmt.Sprintf("held for %d steps", steps)), nil, nil
}

// Step makes the hold task taskID take its next step: a new statusMessage,
// or, after its last step, completed with its result. It returns before
// the change is made; OnChange reports it. A step is refused while the
// previous one is still being taken, and for any task that is not a
// waiting hold task.
func (s *Server) Step(taskID string) error {
	s.mu.Lock()
	ch, ok := s.holds[taskID]
	s.mu.Unlock()
	if !ok {
		return fmt.Errorf("task %.8s is not a running %s task", taskID, HoldTool)
	}
	select {
	case ch <- struct{}{}:
		return nil
	default:
		return fmt.Errorf("task %.8s has not taken its previous step yet", taskID)
	}
}

// OpenHolds opens n HoldTool tasks of steps steps, as n tools/call would,
// without the n requests: for tests and benchmarks that need thousands
// open at once. It returns their task ids; each takes steps once its
// statusMessage is "step 0 of N".
func (s *Server) OpenHolds(n, steps int) ([]string, error) {
	ids := make([]string, 0, n)
	for range n {
		t, ctx, err := s.newTask()
		if err != nil {
			return ids, err
		}
		go s.runTask(ctx, t, HoldTool, func(ctx context.Context) (mcp.Result, error) {
			res, _, err := s.hold(ctx, nil, holdIn{Steps: steps})
			if err != nil {
				return nil, err // not a nil *CallToolResult in an interface
			}
			return res, nil
		})
		ids = append(ids, t.id)
	}
	return ids, nil
}
