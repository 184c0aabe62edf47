package model

import (
	"testing"
	"time"
)

// Issue 20, item 12: a report older than the one the record holds, by the
// server's lastUpdatedAt and then by arrival, changes nothing; a newer one,
// and any end, applies.
func TestApplySkipsAnOlderReport(t *testing.T) {
	t1, t2 := applyT0.Add(time.Second), applyT0.Add(2*time.Second)
	at := func(msg string, updated, received time.Time) Snapshot {
		s := workingSnap()
		s.StatusMessage, s.LastUpdatedAt, s.ReceivedAt = msg, updated, received
		return s
	}
	for _, tc := range []struct {
		name  string
		late  Snapshot
		after string // the record's message after the late report
	}{
		{"older by the server's clock, read later", at("progress 1", t1, t2.Add(time.Hour)), "progress 2"},
		{"same lastUpdatedAt, read earlier", at("progress 1", t2, t1), "progress 2"},
		{"no lastUpdatedAt, read earlier", at("progress 1", time.Time{}, t1), "progress 2"},
		{"newer by the server's clock", at("progress 3", t2.Add(time.Second), t1), "progress 3"},
		{"same lastUpdatedAt, read later", at("progress 3", t2, t2.Add(time.Second)), "progress 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			task := workingTask()
			if _, err := task.Apply(at("progress 2", t2, t2), t2); err != nil {
				t.Fatal(err)
			}
			changed, err := task.Apply(tc.late, t2.Add(time.Minute))
			if err != nil || task.StatusMessage != tc.after || changed != (tc.after != "progress 2") {
				t.Fatalf("changed %v (%v), message %q; want %q", changed, err, task.StatusMessage, tc.after)
			}
		})
	}
	task := workingTask()
	if _, err := task.Apply(at("progress 2", t2, t2), t2); err != nil {
		t.Fatal(err)
	}
	end := at("", t1, t1) // a server whose clock went back still ends the task
	end.Status, end.Result = StatusCompleted, []byte(`{"content":[]}`)
	if changed, err := task.Apply(end, t2); err != nil || !changed || task.Status != StatusCompleted {
		t.Fatalf("an older end: changed %v (%v), status %s; want completed", changed, err, task.Status)
	}
}
