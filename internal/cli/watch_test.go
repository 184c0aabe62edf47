package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/model"
)

// TestWatchTellsATaskThatEndedBetweenSnapshotParts: a snapshot's later
// parts are read as they are sent, so a task open at the watch's start
// can end before its part is read and be in none; its change, with the
// status it had, still makes it one of the tasks the watch found.
func TestWatchTellsATaskThatEndedBetweenSnapshotParts(t *testing.T) {
	task := func(id string, s model.Status) deck.Entry {
		return deck.Entry{Task: &model.Task{ID: id, Status: s, Tool: "sleep"}}
	}
	var out, errOut bytes.Buffer
	w := &watcher{p: &printer{w: &out, errw: &errOut, seen: map[string]string{}}, current: map[string]deck.Entry{}}
	for _, ev := range []deck.Event{
		{Kind: deck.EventSnapshot, Rev: 10, More: true, Entries: []deck.Entry{task("open-a", model.StatusWorking)}},
		{Kind: deck.EventSnapshotMore, Rev: 10},
		{Kind: deck.EventChange, Rev: 11, Prev: model.StatusWorking, Entries: []deck.Entry{task("ended-b", model.StatusCompleted)}},
		{Kind: deck.EventChange, Rev: 12, Entries: []deck.Entry{task("new-c", model.StatusCalling)}},
		{Kind: deck.EventReconcile, Rev: 12, Reconcile: &deck.Reconcile{Total: 2, Done: 2, Reattached: 1, Finished: 1, Over: true}},
	} {
		w.event(ev)
	}
	got := out.String()
	if !strings.Contains(got, "open-a") || !strings.Contains(got, "ended-b") || !strings.Contains(got, "completed") || strings.Contains(got, "new-c") {
		t.Fatalf("the watch found:\n%s\nwant open-a and ended-b (completed), not new-c, created after its start", got)
	}
}
