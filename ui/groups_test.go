package ui

import (
	"slices"
	"strings"
	"testing"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/model"
)

// TestGroupsOneKeyEach: the header counts each group, its key shows it
// (again: every task), and a status filter or esc gives every task back.
func TestGroupsOneKeyEach(t *testing.T) {
	var echo, sleep, ask, failed *model.Task
	h := newHarness(t, func(h *harness) {
		echo = h.call("echo", `{"text":"hi"}`)
		sleep = h.call("sleep", `{"seconds":600}`)
		ask = h.call("approve", `{"action":"deploy"}`)
		failed = h.call("fail", `{"mode":"error"}`)
	})
	h.until("the approval waits and the failure ended", func(m *Model) bool {
		return m.list.waiting == 1 && h.status(failed.ID) == model.StatusFailed
	})
	for _, want := range []string{"[0 all 4]", " 1 open 2 ", " 2 waiting 1 ", " 3 finished 2 ", " 4 problems 1 "} {
		if !strings.Contains(h.screen(), want) {
			t.Errorf("the header lacks %q:\n%s", want, h.screen())
		}
	}
	shows := func(keys string, want ...*model.Task) {
		t.Helper()
		h.key(strings.Split(keys, " ")...)
		var ids []string
		for _, w := range want {
			ids = append(ids, w.ID)
		}
		got := visibleIDs(h.m)
		slices.Sort(got)
		slices.Sort(ids)
		if !slices.Equal(got, ids) {
			t.Errorf("after %s: %v, want %v\n%s", keys, got, ids, h.screen())
		}
	}
	shows("1", sleep, ask)
	if !strings.Contains(h.screen(), "[1 open 2]") {
		t.Errorf("the open tab is not marked:\n%s", h.screen())
	}
	shows("1", echo, sleep, ask, failed) // its key again
	shows("2", ask)
	shows("3", echo, failed)
	shows("4", failed)
	h.key("s") // a status filter: the group gives way
	if h.m.list.group != nil || h.m.statusFilter != model.AllStatuses[0] {
		t.Errorf("s left group %v, status %q", h.m.list.group, h.m.statusFilter)
	}
	shows("3 esc", echo, sleep, ask, failed)
	shows("3 0", echo, sleep, ask, failed)
}

// A group key reads the group's own rows, kept as rows change: after
// single changes, a large batch, removals, a small reload, failing
// polls and a new order, each group (and each with a search) shows
// exactly the rows a pass over every row admits, in the order it shows.
func TestGroupRowsFollowEveryChange(t *testing.T) {
	l := newTaskList()
	tasks := benchTasks(300)
	l.Replace(tasks)
	statuses := []model.Status{model.StatusWorking, model.StatusFailed, model.StatusCompleted, model.StatusInputRequired, model.StatusUnknown}
	changed := func(i int, st model.Status) *model.Task {
		c := tasks[i].Clone()
		c.Status = st
		if st != model.StatusInputRequired {
			c.InputRequests = nil
		}
		return c
	}
	check := func(step string) {
		t.Helper()
		for gi := -1; gi < len(deck.Groups); gi++ {
			var g *deck.Group
			if gi >= 0 {
				g = &deck.Groups[gi]
			}
			for _, text := range []string{"", "tool:tool-1"} {
				l.SetFilter(text, "")
				l.setGroup(g)
				if got, want := len(l.visible), len(rowsByAPass(l)); !sameAsAPass(l) {
					t.Fatalf("%s: group %d, search %q shows %d rows, a pass over every row %d", step, gi+1, text, got, want)
				}
			}
		}
	}
	check("loaded")
	for i := range 10 {
		l.Apply([]*model.Task{changed(i*7, statuses[i%len(statuses)])}, nil)
	}
	check("single changes")
	var batch []*model.Task
	for i := range 40 {
		batch = append(batch, changed(100+i, statuses[i%len(statuses)]))
	}
	l.Apply(batch, []string{tasks[5].ID, tasks[6].ID})
	check("a batch")
	l.Apply(nil, []string{tasks[7].ID, tasks[8].ID})
	check("removals")
	l.failing[tasks[3].ID], l.failing[tasks[11].ID] = true, true // working ones
	check("failing polls")
	l.CycleOrder()
	check("another order")
	l.Replace(tasks[:5])
	check("a small reload")
}

// rowsByAPass are the rows the list's filter admits, found by a pass
// over every row, in the order the list shows them.
func rowsByAPass(l *taskList) []*row {
	var rows []*row
	for _, r := range l.all {
		if g := l.group; g != nil && !g.Holds(r.status, r.waits, r.status.Pollable() && l.failing[r.task.ID]) {
			continue
		}
		if (l.status == "" || r.status == l.status) && (l.server == "" || r.server == l.server) && l.query.Match(&r.text) {
			rows = append(rows, r)
		}
	}
	slices.SortFunc(rows, l.visCmp)
	return rows
}

// sameAsAPass tells whether the list shows what rowsByAPass finds.
func sameAsAPass(l *taskList) bool { return slices.Equal(l.visible, rowsByAPass(l)) }
