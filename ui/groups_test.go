package ui

import (
	"slices"
	"strings"
	"testing"

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
