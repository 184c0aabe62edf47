package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/model"
)

// TestNotifyFirstSnapshotTellsFailuresSinceStart: the feed's first
// snapshot may hold a task that failed after `watch --notify` started
// (before the feed was up); that one is news, and an older failure is
// not.
func TestNotifyFirstSnapshotTellsFailuresSinceStart(t *testing.T) {
	start := time.Now()
	failedAt := func(id string, at time.Time) deck.Entry {
		return deck.Entry{Task: &model.Task{
			ID: id, Status: model.StatusFailed, Tool: "fail", StatusMessage: "simulated failure",
			History:   []model.Transition{{At: at, From: model.StatusWorking, To: model.StatusFailed}},
			UpdatedAt: at,
		}}
	}
	var out bytes.Buffer
	n := &notifier{out: &out, seen: map[string]string{}, since: start}
	n.event(deck.Event{Kind: deck.EventSnapshot, Entries: []deck.Entry{
		failedAt("old", start.Add(-time.Hour)),
		failedAt("new", start.Add(time.Millisecond)),
	}})
	got := out.String()
	if !strings.Contains(got, "failed  new  ") || strings.Contains(got, " old ") || strings.Count(got, "\n") != 1 {
		t.Fatalf("first snapshot told:\n%s\nwant one line, for the task that failed since the start", got)
	}
}
