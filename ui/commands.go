package ui

import (
	"context"
	"encoding/json"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/termtext"
)

// Every action the dashboard takes goes through the Deck in one of these
// commands; each returns a typed message and never touches the model.
// What an action changed comes back through the feed (feed.go), the one
// source of the rows.

type (
	tickMsg    time.Time
	serversMsg struct {
		servers []deck.Server
		// notify is the Deck's event endpoints (nil when it has none or
		// cannot say): the servers view shows the failing ones.
		notify []deck.NotifyEndpoint
		err    error
	}
	// taskUpdatedMsg carries a record after an action on it: a call, or
	// an answer to its input request key.
	taskUpdatedMsg struct {
		act        taskAct
		key        string
		task       *model.Task
		needsInput bool     // a call's server asks for input before its task exists
		again      []string // with needsInput: keys it asks for again, not taking their answers
		err        error
	}
	prunedMsg struct {
		n   int
		err error
	}
	polledNowMsg struct {
		n   int
		err error
	}
	toolsMsg struct {
		server string
		gen    int
		tools  []deck.Tool
		err    error
	}
)

// tickEvery moves the age columns and expires status-line messages. It
// starts no poll: the engine polls.
const tickEvery = time.Second

func tick() tea.Cmd {
	return tea.Tick(tickEvery, func(t time.Time) tea.Msg { return tickMsg(t) })
}

func listServers(ctx context.Context, d deck.Deck) tea.Cmd {
	return func() tea.Msg {
		s, err := d.Servers(ctx)
		msg := serversMsg{servers: s, err: err}
		if nd, ok := d.(deck.Notifier); ok && err == nil {
			// Its error is not the listing's: the view goes on without it.
			msg.notify, _ = nd.NotifyStatus(ctx)
		}
		return msg
	}
}

// taskAct is the action a taskUpdatedMsg reports.
type taskAct int

const (
	actLaunched taskAct = iota
	actAnswered
	actDeclined  // an input request, declined
	actCancelled // an input request, cancelled
	actReused    // a call whose key named a task already: nothing sent
)

// words says what was done, before ": task ID".
func (m taskUpdatedMsg) words() string {
	switch m.act {
	case actAnswered:
		return "answered"
	case actDeclined:
		return "declined input " + termtext.Line(m.key) + " of"
	case actCancelled:
		return "cancelled input " + termtext.Line(m.key) + " of"
	case actReused:
		return "key " + termtext.Line(m.key) + " already names it, nothing sent"
	}
	return "launched"
}

// answer sends one input response to a task; act says what it was.
func answer(ctx context.Context, d deck.Deck, id, key string, resp json.RawMessage, act taskAct) tea.Cmd {
	return func() tea.Msg {
		t, err := d.Answer(ctx, id, map[string]json.RawMessage{key: resp})
		return taskUpdatedMsg{act: act, key: key, task: t, err: err}
	}
}

// continueCall answers an input request of a call whose task does not
// exist yet; once every request of the round has its answer the deck
// sends the call's next round.
func continueCall(ctx context.Context, d deck.Deck, id, key string, resp json.RawMessage, act taskAct) tea.Cmd {
	return func() tea.Msg {
		res, err := d.Continue(ctx, id, map[string]json.RawMessage{key: resp})
		return taskUpdatedMsg{act: act, key: key, task: res.Task, needsInput: res.NeedsInput, again: res.Again, err: err}
	}
}

func prune(ctx context.Context, d deck.Deck) tea.Cmd {
	return func() tea.Msg {
		n, err := d.Prune(ctx, 0)
		return prunedMsg{n: n, err: err}
	}
}

// pollNow makes tasks due at once: the engine polls them.
func pollNow(ctx context.Context, d deck.Deck, ids []string) tea.Cmd {
	return func() tea.Msg {
		return polledNowMsg{n: len(ids), err: d.PollNow(ctx, ids)}
	}
}

// listTools lists a server's tools; ctx bounds it (a timeout, and esc).
// gen names the listing the answer belongs to.
func listTools(ctx context.Context, d deck.Deck, server string, gen int) tea.Cmd {
	return func() tea.Msg {
		list, err := d.Tools(ctx, model.ServerRef{Name: server}, false)
		if err != nil {
			return toolsMsg{server: server, gen: gen, err: err}
		}
		return toolsMsg{server: server, gen: gen, tools: list.Tools}
	}
}

// call makes a new call (the deck checks it against the server's tool
// list first). A call its server answers with input requests comes back
// needsInput: its record holds them, and answering them sends the next
// round.
func call(ctx context.Context, d deck.Deck, c *newCall) tea.Cmd {
	return func() tea.Msg {
		req := deck.CallRequest{Server: model.ServerRef{Name: c.server}, Tool: c.tool, Args: c.args, Key: c.key}
		res, err := d.Call(ctx, req)
		act := actLaunched
		if res.Reused { // the key named this call's task already
			act = actReused
		}
		return taskUpdatedMsg{act: act, key: c.key, task: res.Task, needsInput: res.NeedsInput, err: err}
	}
}
