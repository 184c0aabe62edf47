package demo

import (
	"context"
	"errors"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/taskdeck/taskdeck/mcpclient/wire"
)

// start creates a task for a tools/call and runs the rest of the handler
// chain (the ordinary go-sdk tool handler) in its own goroutine. The
// request's session dies with the response (stateless HTTP), so the
// goroutine runs under the task's detached context.
func (s *Server) start(next mcp.MethodHandler, req *mcp.CallToolRequest) (mcp.Result, error) {
	t, ctx, err := s.newTask()
	if err != nil {
		return nil, err
	}
	seed := s.tasks.snapshot(t) // before the tool can move it on
	s.log.Debug("task created", "tool", req.Params.Name)
	go s.run(ctx, t, next, req)
	return &wire.CreateTaskResult{ResultType: wire.ResultTypeTask, Task: seed}, nil
}

// newTask creates a task and counts it.
func (s *Server) newTask() (*task, context.Context, error) {
	t, ctx, err := s.tasks.create()
	if err != nil {
		return nil, nil, &jsonrpc.Error{Code: wire.CodeInternal, Message: err.Error()}
	}
	s.count(func(st *Stats) {
		st.TasksCreated++
		st.TaskIDs = append(st.TaskIDs, t.id)
	})
	return t, ctx, nil
}

// run runs the rest of the handler chain inside task t to its end: the
// task takes its outcome, a panic included.
func (s *Server) run(ctx context.Context, t *task, next mcp.MethodHandler, req *mcp.CallToolRequest) {
	s.runTask(ctx, t, req.Params.Name, func(ctx context.Context) (mcp.Result, error) {
		return next(ctx, "tools/call", req)
	})
}

// runTask runs tool inside task t to its end: the task takes its
// outcome, a panic included.
func (s *Server) runTask(ctx context.Context, t *task, name string, tool func(context.Context) (mcp.Result, error)) {
	defer s.tasks.done(t)
	var res mcp.Result
	var err error
	defer func() { s.tasks.finish(t, res, err) }()
	defer s.recoverTo(&err, name)
	res, err = tool(context.WithValue(ctx, runningKey{}, &running{s.tasks, t}))
}

// running ties a tool handler's context to its task.
type running struct {
	tb *table
	t  *task
}

type runningKey struct{}

var errNoTask = errors.New("this tool needs a task to ask for input")

// report sets the task's statusMessage; poll, if non-zero, its
// pollIntervalMs. Outside a task it does nothing.
func report(ctx context.Context, msg string, poll time.Duration) {
	if r, ok := ctx.Value(runningKey{}).(*running); ok {
		r.tb.progress(r.t, msg, poll)
	}
}

// ask moves the task to input_required with these elicitations and blocks
// until tasks/update has answered all of them.
func ask(ctx context.Context, reqs map[string]*mcp.ElicitParams) (map[string]*mcp.ElicitResult, error) {
	r, ok := ctx.Value(runningKey{}).(*running)
	if !ok {
		return nil, errNoTask
	}
	ch, err := r.tb.ask(r.t, reqs)
	if err != nil {
		return nil, err
	}
	select {
	case ans := <-ch:
		return ans, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// wait sleeps d scaled by Options.Speed, or until ctx ends.
func (s *Server) wait(ctx context.Context, d time.Duration) error {
	tm := time.NewTimer(s.scale(d))
	defer tm.Stop()
	select {
	case <-tm.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *Server) scale(d time.Duration) time.Duration {
	return time.Duration(float64(d) * s.opts.Speed)
}
