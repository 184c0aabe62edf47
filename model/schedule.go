package model

import (
	"container/heap"
	"time"
)

// Schedule says which tasks are due for a poll. It keeps one entry per
// task, at most one poll per task in flight, and at most PerServer polls
// in flight per server, so the work in progress is bounded by the limits
// and never by the number of tasks. It is not safe for concurrent use:
// its owner (the UI's Update, or a watch loop) serialises access.
type Schedule struct {
	perServer int
	due       dueHeap
	entries   map[string]*dueEntry
	inFlight  map[ServerRef]int
}

type dueEntry struct {
	id       string
	server   ServerRef
	at       time.Time
	index    int // position in the heap, -1 while in flight
	inFlight bool
}

// NewSchedule makes an empty schedule.
func NewSchedule(perServer int) *Schedule {
	return &Schedule{perServer: max(perServer, 1), entries: map[string]*dueEntry{}, inFlight: map[ServerRef]int{}}
}

// Set (re)schedules a task's next poll. A task whose poll is in flight
// keeps the new time for after Done.
func (s *Schedule) Set(id string, server ServerRef, at time.Time) {
	e, ok := s.entries[id]
	if !ok {
		e = &dueEntry{id: id, server: server, index: -1}
		s.entries[id] = e
	}
	e.at = at
	switch {
	case e.inFlight:
	case e.index >= 0:
		heap.Fix(&s.due, e.index)
	default:
		heap.Push(&s.due, e)
	}
}

// Remove drops a task from the schedule (it ended, or was forgotten).
func (s *Schedule) Remove(id string) {
	e, ok := s.entries[id]
	if !ok {
		return
	}
	if e.index >= 0 {
		heap.Remove(&s.due, e.index)
	}
	if e.inFlight {
		s.inFlight[e.server]--
	}
	delete(s.entries, id)
}

// Take returns the tasks due at now whose server has room, marking them
// in flight. A due task whose server is full waits for a Done.
func (s *Schedule) Take(now time.Time) []string {
	var ids []string
	var blocked []*dueEntry
	for s.due.Len() > 0 && !s.due[0].at.After(now) {
		e := heap.Pop(&s.due).(*dueEntry)
		if s.inFlight[e.server] >= s.perServer {
			blocked = append(blocked, e)
			continue
		}
		e.inFlight = true
		s.inFlight[e.server]++
		ids = append(ids, e.id)
	}
	for _, e := range blocked {
		heap.Push(&s.due, e)
	}
	return ids
}

// Done ends a task's poll in flight and schedules the next one at next
// (a zero time removes the task: nothing more to poll).
func (s *Schedule) Done(id string, next time.Time) {
	e, ok := s.entries[id]
	if !ok {
		return
	}
	if e.inFlight {
		e.inFlight = false
		s.inFlight[e.server]--
	}
	if next.IsZero() {
		s.Remove(id)
		return
	}
	e.at = next
	heap.Push(&s.due, e)
}

// Next is when the earliest waiting task is due.
func (s *Schedule) Next() (time.Time, bool) {
	if s.due.Len() == 0 {
		return time.Time{}, false
	}
	return s.due[0].at, true
}

// Due is when a task is due, and whether its poll is in flight now.
func (s *Schedule) Due(id string) (at time.Time, inFlight, ok bool) {
	e, ok := s.entries[id]
	if !ok {
		return time.Time{}, false, false
	}
	return e.at, e.inFlight, true
}

// Len is the number of tasks scheduled or in flight.
func (s *Schedule) Len() int { return len(s.entries) }

// InFlight is the number of polls in flight.
func (s *Schedule) InFlight() int {
	n := 0
	for _, c := range s.inFlight {
		n += c
	}
	return n
}

type dueHeap []*dueEntry

func (h dueHeap) Len() int           { return len(h) }
func (h dueHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h dueHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *dueHeap) Push(x any) {
	e := x.(*dueEntry)
	e.index = len(*h)
	*h = append(*h, e)
}
func (h *dueHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	e.index = -1
	*h = old[:len(old)-1]
	return e
}
