package ui

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/taskdeck/taskdeck/mcpclient"
	"github.com/taskdeck/taskdeck/model"
)

// Every bit of IO the dashboard does is one of these commands; each
// returns a typed message, tagged with the task it is about, and never
// touches the model.

type (
	// openLoadedMsg carries every open task: what a restart must show,
	// and all the first frame waits for.
	openLoadedMsg struct {
		tasks []*model.Task
		err   error
	}
	// recentLoadedMsg carries the newest finished records, read after the
	// open tasks are shown. gen is the load it belongs to.
	recentLoadedMsg struct {
		gen    int
		tasks  []*model.Task
		hidden int // older finished records not loaded
		err    error
	}
	tickMsg   time.Time
	polledMsg struct {
		id  string
		res mcpclient.PollResult
		err error
	}
	// taskUpdatedMsg carries a task after an action (answer, cancel, call).
	taskUpdatedMsg struct {
		verb string
		task *model.Task
		err  error
		call *newCall // for "launched": the call, to retry with answers
	}
	forgottenMsg struct {
		ids []string
		err error
	}
	prunedMsg struct {
		n   int
		err error
	}
	toolsMsg struct {
		server string
		gen    int
		tools  []*mcp.Tool
		err    error
	}
)

// tickEvery is the scheduler's heartbeat: due polls start on a tick, and
// the age columns move with it.
const tickEvery = 200 * time.Millisecond

func tick() tea.Cmd {
	return tea.Tick(tickEvery, func(t time.Time) tea.Msg { return tickMsg(t) })
}

func loadOpen(tr *mcpclient.Tracker) tea.Cmd {
	return func() tea.Msg { return readOpen(tr) }
}

func readOpen(tr *mcpclient.Tracker) openLoadedMsg {
	tasks, err := tr.Store().OpenTasks()
	return openLoadedMsg{tasks: tasks, err: err}
}

// loadRecent reads the newest limit records and counts the records left
// out. Only finished ones come back: the open tasks (openIDs) are already
// shown, and only they are polled. It reads limit records however large
// the store, but counting walks every status index key.
func loadRecent(tr *mcpclient.Tracker, gen, limit int, openIDs []string) tea.Cmd {
	return func() tea.Msg {
		st := tr.Store()
		recent, err := st.Newest(limit)
		if err != nil {
			return recentLoadedMsg{gen: gen, err: err}
		}
		counts, err := st.Counts()
		if err != nil {
			return recentLoadedMsg{gen: gen, err: err}
		}
		shown := make(map[string]bool, len(openIDs))
		for _, id := range openIDs {
			shown[id] = true
		}
		loaded := len(shown)
		var done []*model.Task
		for _, t := range recent {
			if !shown[t.ID] {
				loaded++
				if t.Status.Terminal() {
					done = append(done, t)
				}
			}
		}
		total := 0
		for _, n := range counts {
			total += n
		}
		return recentLoadedMsg{gen: gen, tasks: done, hidden: max(total-loaded, 0)}
	}
}

func poll(ctx context.Context, tr *mcpclient.Tracker, id string) tea.Cmd {
	return func() tea.Msg {
		res, err := tr.Poll(ctx, id)
		return polledMsg{id: id, res: res, err: err}
	}
}

// answer sends one input response; verb says what it was ("answered",
// "declined input K of").
func answer(ctx context.Context, tr *mcpclient.Tracker, id, key string, resp json.RawMessage, verb string) tea.Cmd {
	return func() tea.Msg {
		t, err := tr.Answer(ctx, id, map[string]json.RawMessage{key: resp})
		return taskUpdatedMsg{verb: verb, task: t, err: err}
	}
}

func cancelTasks(ctx context.Context, tr *mcpclient.Tracker, ids []string) tea.Cmd {
	cmds := make([]tea.Cmd, len(ids))
	for i, id := range ids {
		cmds[i] = func() tea.Msg {
			t, err := tr.Cancel(ctx, id)
			return taskUpdatedMsg{verb: "cancel sent", task: t, err: err}
		}
	}
	return tea.Batch(cmds...)
}

func forget(tr *mcpclient.Tracker, ids []string) tea.Cmd {
	return func() tea.Msg {
		var errs []error
		for _, id := range ids {
			errs = append(errs, tr.Forget(id))
		}
		return forgottenMsg{ids: ids, err: errors.Join(errs...)}
	}
}

func prune(tr *mcpclient.Tracker) tea.Cmd {
	return func() tea.Msg {
		n, err := tr.Prune(0)
		return prunedMsg{n: n, err: err}
	}
}

// listTools lists a server's tools; ctx bounds it (a timeout, and esc).
// gen names the listing the answer belongs to.
func listTools(ctx context.Context, tr *mcpclient.Tracker, server string, gen int) tea.Cmd {
	return func() tea.Msg {
		sess, err := tr.Pool().Session(ctx, model.ServerRef{Name: server})
		if err != nil {
			return toolsMsg{server: server, gen: gen, err: err}
		}
		tools, err := sess.ListTools(ctx)
		return toolsMsg{server: server, gen: gen, tools: tools, err: err}
	}
}

// call launches a tool. answers, keyed like the server's input requests,
// answer a call that needs input before its task exists; a request they
// do not cover comes back as *mcpclient.InputNeededError.
func call(ctx context.Context, tr *mcpclient.Tracker, c *newCall) tea.Cmd {
	return func() tea.Msg {
		t, _, err := tr.Call(ctx, mcpclient.CallRequest{
			Server: model.ServerRef{Name: c.server}, Tool: c.tool, Args: c.args,
			Input: func(_ context.Context, reqs map[string]model.InputRequest) (map[string]json.RawMessage, error) {
				out := map[string]json.RawMessage{}
				for key := range reqs {
					ans, ok := c.answers[key]
					if !ok {
						return nil, &mcpclient.InputNeededError{Requests: reqs}
					}
					out[key] = ans
				}
				return out, nil
			},
		})
		return taskUpdatedMsg{verb: "launched", task: t, err: err, call: c}
	}
}
