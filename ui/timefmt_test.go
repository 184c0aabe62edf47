package ui

import (
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"
	"github.com/taskdeck/taskdeck/model"
)

// TestExpiryShownAndWarned: where a server set a TTL the EXP column says
// when the task expires; open work about to expire is flagged in its row,
// in the header and in the detail pane; t shows clock times.
func TestExpiryShownAndWarned(t *testing.T) {
	ttl := func(task *model.Task, created time.Time, d time.Duration) {
		ms := d.Milliseconds()
		task.TTLMs, task.ServerCreatedAt = &ms, created
	}
	mk := func(id, tool string, st model.Status, age time.Duration) *model.Task {
		task := model.NewIntent(model.ServerRef{Name: "build"}, "tool-"+tool, nil, "", fixedNow.Add(-age))
		task.ID, task.Status, task.TaskID = id, st, "remote-"+id
		return task
	}
	soon := mk("t0soon", "soon", model.StatusWorking, 9*time.Minute+30*time.Second)
	ttl(soon, soon.CreatedAt, 10*time.Minute) // 30 s left of 10 min
	later := mk("t1later", "later", model.StatusWorking, time.Minute)
	ttl(later, later.CreatedAt, 2*time.Hour)
	gone := mk("t2gone", "gone", model.StatusCompleted, time.Hour)
	ttl(gone, gone.CreatedAt, 10*time.Minute)
	plain := mk("t3plain", "plain", model.StatusWorking, time.Minute)

	m := loaded(t, []*model.Task{soon, later, gone, plain}, 120, 30)
	screen := plainView(m)
	cell := func(tool string) string {
		f := strings.Fields(lineWith(screen, " tool-"+tool+" "))
		return f[len(f)-1]
	}
	if got := cell("soon"); got != "!30s" {
		t.Errorf("EXP of a task 30 s from its end: %q, want !30s", got)
	}
	if got := cell("later"); got != "1h" {
		t.Errorf("EXP of a task with 1h59m left: %q, want 1h", got)
	}
	if got := cell("gone"); got != "gone" {
		t.Errorf("EXP of an expired finished task: %q", got)
	}
	if got := lineWith(screen, " tool-plain "); strings.Contains(got, "!") {
		t.Errorf("a task without TTL is flagged: %q", got)
	}
	if !strings.Contains(screen, "! 1 open expire soon") {
		t.Errorf("the header does not warn:\n%s", screen)
	}

	m.cursor = m.list.IndexOf(soon.ID)
	m.openDetail()
	if d := plainView(m); !strings.Contains(d, "expires") || !strings.Contains(d, "in 30s") || !strings.Contains(d, "! expires soon: it becomes unknown if still open then") {
		t.Errorf("the detail pane does not warn:\n%s", d)
	}
	m.detail = nil

	m.Update(keyMsg("t"))
	screen = plainView(m)
	want := later.CreatedAt.Local().Format("15:04")
	if got := lineWith(screen, " tool-later "); !strings.Contains(got, want) {
		t.Errorf("t: the row %q lacks its clock time %s", got, want)
	}
	m.Update(keyMsg("t"))
	if got := lineWith(plainView(m), " tool-later "); strings.Contains(got, want) || !strings.Contains(got, "1m") {
		t.Errorf("t again: the row %q is not relative", got)
	}
}

// TestExpiryFromTheDemoServer: the demo server's TTL reaches the column.
func TestExpiryFromTheDemoServer(t *testing.T) {
	var sleep *model.Task
	h := newHarness(t, func(h *harness) { sleep = h.call("sleep", `{"seconds":600}`) })
	h.until("its TTL is known", func(m *Model) bool {
		task, _ := m.list.Get(sleep.ID)
		return !task.Deadline().IsZero()
	})
	task, _ := h.m.list.Get(sleep.ID)
	cell, _ := h.m.expiry(task)
	if cell == "" || !strings.Contains(lineWith(h.screen(), h.m.list.shortID(sleep.ID)), cell) {
		t.Fatalf("the row lacks its expiry %q:\n%s", cell, h.screen())
	}
}

func plainView(m *Model) string { return ansi.Strip(m.View().Content) }
