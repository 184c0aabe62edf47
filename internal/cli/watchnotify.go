package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/termtext"
	"golang.org/x/term"
)

// notifyLineMax bounds the server's text (the questions, the error) on
// one line of `watch --notify`, in runes.
const notifyLineMax = 200

// notifyRecentFinished is how many of the newest finished records the
// first snapshot of `watch --notify` holds: where a failure since the
// command started is found (older failures are history, not news).
const notifyRecentFinished = 100

// notifyRun is `watch --notify`: until interrupted (or --timeout), one
// line for each event that needs a person (a task starts waiting for
// input, or a new round of questions; a task fails; a task is orphaned),
// the tasks already waiting at the start first, and failures since the
// command started (they may come before the feed's first snapshot). On a
// terminal each line also rings the bell and sends a desktop notification.
func notifyRun(opts *WatchOptions) error {
	start := time.Now()
	f := opts.f
	ctx, cancel := opts.watchContext()
	defer cancel()
	dk, err := f.deck(opts.ctx)
	if err != nil {
		return err
	}
	n := &notifier{out: f.stdout, seen: map[string]string{}, since: start}
	if out, ok := f.stdout.(*os.File); ok && term.IsTerminal(int(out.Fd())) {
		n.osc = termtext.DesktopNotification(os.Getenv)
	}
	feed, err := dk.WatchWindow(ctx, 0, deck.Window{Finished: notifyRecentFinished})
	if err == nil {
		for ev := range feed.Events() {
			n.event(ev)
		}
		err = feed.Err()
	}
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded) && opts.ctx.Err() == nil:
		return nil // --timeout: the end asked for
	case err != nil:
		return err
	}
	return ctx.Err()
}

// notifier turns the feed into lines for a person.
type notifier struct {
	out io.Writer
	// osc makes the desktop notification of a text; nil: none (stdout is
	// not a terminal).
	osc     func(text string) string
	seen    map[string]string // a task's last need (see need), by id
	started bool              // the first snapshot's last part is in
	since   time.Time         // the command's start
}

// need is what a task needs of a person, "" for nothing: a new value is
// news (a second round of questions is a new need).
func need(t *model.Task) string {
	switch {
	case t.WaitsForInput() && escalated(t):
		return "deadline input " + strings.Join(t.PendingInputs(), ",")
	case t.WaitsForInput():
		return "input " + strings.Join(t.PendingInputs(), ",")
	case t.Status == model.StatusFailed, t.Status == model.StatusOrphaned:
		return string(t.Status)
	}
	return ""
}

// escalated tells a wait the engine escalated at its deadline (issue 27).
func escalated(t *model.Task) bool {
	d := t.AnswerDeadline(0) // the record's own, of this wait
	return d != nil && !d.Escalated.IsZero()
}

func (n *notifier) event(ev deck.Event) {
	for _, id := range ev.Deleted {
		delete(n.seen, id)
	}
	snapshot := ev.Kind == deck.EventSnapshot || ev.Kind == deck.EventSnapshotMore
	first := snapshot && !n.started
	for _, e := range ev.Entries {
		t := e.Task
		now, was := need(t), n.seen[t.ID]
		if now == "" {
			delete(n.seen, t.ID) // kept: only tasks with a need, as the store keeps them
		} else {
			n.seen[t.ID] = now
		}
		// At the start what waits now is news, and what failed or was
		// orphaned since the command started; older ones are history
		// (`taskdeck ls` lists them).
		if now == "" || now == was || (first && !t.WaitsForInput() && t.StatusSince().Before(n.since)) {
			continue
		}
		n.tell(t)
	}
	if snapshot && !ev.More {
		n.started = true
	}
}

// tell prints one task's line and, on a terminal, notifies the desktop.
func (n *notifier) tell(t *model.Task) {
	var what, detail string
	switch {
	case t.WaitsForInput():
		what = "input needed"
		if escalated(t) {
			what = "deadline passed"
		}
		var qs []string
		for _, k := range t.PendingInputs() {
			q := k
			if e, err := t.InputRequests[k].Elicitation(); err == nil && e.Message != "" {
				q = e.Message
			}
			qs = append(qs, q)
		}
		detail = strings.Join(qs, " · ")
	case t.Status == model.StatusFailed:
		what, detail = "failed", t.StatusMessage
		if t.Error != nil {
			detail = t.Error.Message
		} else if t.LocalError != "" {
			detail = t.LocalError
		}
	default:
		what, detail = string(t.Status), t.StatusMessage
	}
	tool := termtext.Line(t.Tool)
	line := fmt.Sprintf("%s  %s  %s  %s %s", time.Now().UTC().Format(time.TimeOnly), what, t.ID, termtext.Line(t.Server.String()), tool)
	if detail = termtext.OneLine(termtext.Line(detail), notifyLineMax); detail != "" {
		line += ": " + detail
	}
	if n.osc != nil {
		line += "\a" + n.osc("taskdeck: "+tool+" "+what)
	}
	fmt.Fprintln(n.out, line)
}
