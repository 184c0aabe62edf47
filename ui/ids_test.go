package ui

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/model"
)

// TestShortIDsDifferEarly: ids made in one millisecond share all but
// their last characters; the ID column shows each id's shortest unique
// end, which the deck's Get resolves to that task alone.
func TestShortIDsDifferEarly(t *testing.T) {
	now := time.Now()
	var tasks []*model.Task
	for range 2000 {
		tasks = append(tasks, model.NewIntent(model.ServerRef{Name: "build"}, "compile", nil, "", now))
	}
	m := loaded(t, tasks, 120, 30)
	seen := map[string]bool{}
	longest := 0
	for _, task := range tasks {
		s := m.list.shortID(task.ID)
		if len(s) < minShortID || !strings.HasSuffix(task.ID, s) || seen[s] {
			t.Fatalf("short id %q of %s: too short, not its end, or not unique", s, task.ID)
		}
		seen[s] = true
		longest = max(longest, len(s))
		for _, other := range tasks {
			if other != task && strings.HasSuffix(other.ID, s) {
				t.Fatalf("short id %q of %s is also the end of %s", s, task.ID, other.ID)
			}
		}
	}
	t.Logf("2000 ids of one millisecond: %s…%s; short ids of at most %d characters", tasks[0].ID, tasks[len(tasks)-1].ID, longest)
	if longest > 6 {
		t.Errorf("short ids of %d characters for 2000 tasks", longest)
	}
	// The row shows it.
	top := m.list.visible[0].task
	if got := lineWith(plainView(m), " "+m.list.shortID(top.ID)+" "); got == "" {
		t.Fatalf("no row shows the short id %s:\n%s", m.list.shortID(top.ID), plainView(m))
	}

	// A forgotten task no longer counts: a short id may shrink back.
	a, b := tasks[0], tasks[1]
	m.list.Apply(nil, []string{b.ID})
	if s := m.list.shortID(a.ID); !strings.HasSuffix(a.ID, s) {
		t.Fatalf("short id %q after a delete", s)
	}
}

// TestShortIDResolvesThroughTheDeck: the id the column shows is one the
// command line's get takes.
func TestShortIDResolvesThroughTheDeck(t *testing.T) {
	h := newHarness(t, func(h *harness) {
		for range 5 {
			h.call("echo", `{"text":"hi"}`)
		}
	})
	for _, r := range h.m.list.visible {
		short := h.m.list.shortID(r.task.ID)
		e, err := h.eng.Get(context.Background(), short)
		if err != nil || e.Task.ID != r.task.ID {
			t.Fatalf("Get(%s) = %v, %v; want %s", short, e.Task, err, r.task.ID)
		}
		if !strings.Contains(h.screen(), " "+short+" ") {
			t.Fatalf("the table lacks %s:\n%s", short, h.screen())
		}
	}
}
