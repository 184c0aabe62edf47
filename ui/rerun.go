package ui

import (
	"context"
	"fmt"
	"strings"
	"sync"

	tea "charm.land/bubbletea/v2"
	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/present"
	"github.com/taskdeck/taskdeck/termtext"
)

// askRerun asks before launching the targets that may be re-run again,
// each as a new call of the same tool with the same arguments.
func (m *Model) askRerun() tea.Cmd {
	var again []*model.Task
	for _, t := range m.targets() {
		if t.Rerunnable() {
			again = append(again, t)
		}
	}
	if len(again) == 0 {
		m.say("nothing to re-run: only failed, cancelled, unknown or orphaned tasks can be re-run")
		return nil
	}
	m.ask(fmt.Sprintf("Re-run %s? Each is a new call of the same tool with the same arguments; the old records stay.",
		present.Count(len(again), "task")), again, choice{"Yes, re-run", actRerun})
	return nil
}

// rerun launches each task again through the Deck: a new record that
// names the one it repeats. No idempotency key goes with it: the old
// record's key would name the old call.
func (m *Model) rerun(ids []string) tea.Cmd {
	reqs := map[string]deck.CallRequest{}
	for _, id := range ids {
		if t, ok := m.list.Get(id); ok {
			reqs[id] = deck.CallRequest{Server: t.Server, Tool: t.Tool, Args: t.Arguments, Repeats: t.ID}
		}
	}
	d := m.deck
	var mu sync.Mutex
	var made []string
	return m.startBulk("re-running", "re-ran", ids, 1, oneByOne(func(ctx context.Context, id string) error {
		req, ok := reqs[id]
		if !ok {
			return fmt.Errorf("its record is gone")
		}
		res, err := d.Call(ctx, req)
		if err == nil {
			mu.Lock()
			made = append(made, res.Task.ID)
			mu.Unlock()
		}
		return err
	}), func(m *Model) {
		mu.Lock()
		defer mu.Unlock()
		// The new records by id, so that get and answer can take them.
		switch {
		case len(made) == 1 && len(ids) == 1:
			m.say(fmt.Sprintf("re-ran task %s: the new record is task %s", ids[0], made[0]))
		case len(made) > 0:
			m.say(fmt.Sprintf("re-ran %s: the new records are %s", present.Count(len(made), "task"), idList(made, maxNamed)))
		}
		if len(made) == 1 { // one re-run: the cursor follows it, as after a new call
			m.selectNext = made[0]
			m.selectNew()
		}
	})
}

// maxNamed bounds the ids a status line names.
const maxNamed = 3

// idList names up to n ids, and how many more.
func idList(ids []string, n int) string {
	if len(ids) <= n {
		return strings.Join(ids, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(ids[:n], ", "), len(ids)-n)
}

// selectNew puts the cursor on the task just made once its row is shown
// (the feed may bring it before or after the call's answer).
func (m *Model) selectNew() {
	if i := m.list.IndexOf(m.selectNext); m.selectNext != "" && i >= 0 {
		m.cursor, m.selectNext = i, ""
		m.clampCursor()
	}
}

// nextSteps is what the detail pane offers for a task that ended
// without its result: re-run it, or forget it.
func (m *Model) nextSteps(t *model.Task) string {
	if !t.Rerunnable() {
		return ""
	}
	why := "it ended without a result"
	if t.Status == model.StatusOrphaned {
		why = "taskdeck stopped before the server's answer arrived: the server may or may not have started it"
	}
	return fmt.Sprintf("  %s.\n  %s: re-run it, a new call of %s with the same arguments (asked first)\n  %s: forget this record (its server is not told)",
		why, m.keys.Rerun.Help().Key, termtext.Line(t.Tool), m.keys.Forget.Help().Key)
}
