package model

import (
	"slices"
	"testing"
	"time"
	"unsafe"
)

func TestScheduleTakesDueTasksWithinServerLimits(t *testing.T) {
	a, b := ServerRef{Name: "a"}, ServerRef{Name: "b"}
	t0 := time.Unix(1000, 0)
	s := NewSchedule(2)
	for i, id := range []string{"a1", "a2", "a3"} {
		s.Set(id, a, t0.Add(time.Duration(i)*time.Millisecond))
	}
	s.Set("b1", b, t0)
	s.Set("later", b, t0.Add(time.Hour))

	got := s.Take(t0.Add(time.Second))
	slices.Sort(got)
	if want := []string{"a1", "a2", "b1"}; !slices.Equal(got, want) {
		t.Fatalf("took %v, want %v (a3 waits: server a is full)", got, want)
	}
	if s.InFlight() != 3 {
		t.Fatalf("in flight %d", s.InFlight())
	}
	if again := s.Take(t0.Add(time.Second)); len(again) != 0 {
		t.Fatalf("took %v while server a is full and the rest is in flight or not due", again)
	}
	// A finished poll frees its server's slot for the blocked task.
	s.Done("a1", t0.Add(time.Minute))
	if got := s.Take(t0.Add(time.Second)); !slices.Equal(got, []string{"a3"}) {
		t.Fatalf("after a1 finished took %v, want [a3]", got)
	}
	// Done with a zero time removes the task.
	s.Done("b1", time.Time{})
	if _, _, ok := s.Due("b1"); ok || s.Len() != 4 {
		t.Fatalf("b1 still scheduled, len %d", s.Len())
	}
	// a1 waits for full server a: the wake is b's later task.
	if at, ok := s.Wake(); !ok || !at.Equal(t0.Add(time.Hour)) {
		t.Fatalf("wake %v %v, want %v", at, ok, t0.Add(time.Hour))
	}
}

func TestScheduleSetWhileInFlightAppliesAfterDone(t *testing.T) {
	s := NewSchedule(1)
	ref := ServerRef{Name: "a"}
	t0 := time.Unix(0, 0)
	s.Set("x", ref, t0)
	if got := s.Take(t0); len(got) != 1 {
		t.Fatal("not taken")
	}
	s.Set("x", ref, t0) // "poll now" pressed while a poll runs: still one in flight
	if got := s.Take(t0); len(got) != 0 {
		t.Fatalf("second poll of one task in flight: %v", got)
	}
	s.Remove("x")
	if s.Len() != 0 || s.InFlight() != 0 {
		t.Fatalf("remove left len %d in flight %d", s.Len(), s.InFlight())
	}
}

// A full server's overdue task must not hide another server's due time:
// a loop that slept until it would miss that until a poll of the full one
// ends.
func TestScheduleWakeSkipsFullServers(t *testing.T) {
	s := NewSchedule(1)
	a, b := ServerRef{Name: "a"}, ServerRef{Name: "b"}
	t0 := time.Unix(1000, 0)
	s.Set("a1", a, t0)
	s.Set("a2", a, t0)
	s.Set("b1", b, t0.Add(time.Second))
	if got := s.Take(t0); len(got) != 1 || got[0] != "a1" {
		t.Fatalf("Take = %v, want [a1]", got)
	}
	if at, ok := s.Wake(); !ok || !at.Equal(t0.Add(time.Second)) {
		t.Fatalf("Wake = %v %v, want b1's %v (a is full)", at, ok, t0.Add(time.Second))
	}
	s.Done("a1", time.Time{})
	if at, ok := s.Wake(); !ok || !at.Equal(t0) {
		t.Fatalf("after Done, Wake = %v %v, want a2's %v", at, ok, t0)
	}
}

func TestScheduleAllDue(t *testing.T) {
	s := NewSchedule(4)
	a := ServerRef{Name: "a"}
	t0 := time.Unix(1000, 0)
	s.Set("x", a, t0.Add(time.Minute))
	s.Set("y", a, t0.Add(time.Hour))
	if got := s.Take(t0); len(got) != 0 {
		t.Fatalf("Take before AllDue = %v, want none", got)
	}
	s.AllDue(t0)
	if got := s.Take(t0); !slices.Equal(slices.Sorted(slices.Values(got)), []string{"x", "y"}) {
		t.Fatalf("Take after AllDue = %v, want x and y", got)
	}
}

// TestSetWhileInFlightIsKeptAfterDone: a task made due while its poll is
// in flight (an answer, a cancel, poll-all) is polled at that time after
// the poll ends, not at the later time the poll's outcome asked for.
func TestSetWhileInFlightIsKeptAfterDone(t *testing.T) {
	s := NewSchedule(1)
	ref := ServerRef{Name: "a"}
	t0 := time.Unix(1000, 0)
	s.Set("x", ref, t0)
	if got := s.Take(t0); len(got) != 1 {
		t.Fatalf("Take = %v, want x", got)
	}
	s.Set("x", ref, t0.Add(time.Second))
	s.Done("x", t0.Add(time.Hour))
	if at, inFlight, ok := s.Due("x"); !ok || inFlight || !at.Equal(t0.Add(time.Second)) {
		t.Fatalf("after Done: due %v (in flight %v, scheduled %v), want %v", at, inFlight, ok, t0.Add(time.Second))
	}
	// Once only: the next poll's outcome decides again.
	s.Take(t0.Add(time.Second))
	s.Done("x", t0.Add(time.Hour))
	if at, _, _ := s.Due("x"); !at.Equal(t0.Add(time.Hour)) {
		t.Fatalf("the pending time stuck: due %v, want %v", at, t0.Add(time.Hour))
	}
}

// TestScheduleEntryIsCompact: the schedule keeps one entry per open task
// (10,000 in the poll benchmark, target 2.2: ≤ 2 KiB per open task all
// told); it was 112 bytes with a ServerRef and two time.Time of its own.
func TestScheduleEntryIsCompact(t *testing.T) {
	if got := unsafe.Sizeof(dueEntry{}); got > 48 {
		t.Fatalf("a schedule entry takes %d bytes, want at most 48", got)
	}
}
