package model

import (
	"cmp"
	"container/heap"
	"maps"
	"slices"
	"time"
)

// Schedule says which tasks are due for a poll. It keeps one entry per
// task, at most one poll per task in flight, and at most PerServer polls
// in flight per server, so the work in progress is bounded by the limits
// and never by the number of tasks. It is not safe for concurrent use:
// its owner (the UI's Update, or a watch loop) serialises access.
type Schedule struct {
	perServer int
	// One due-time heap per server: a server at its in-flight limit is
	// skipped whole, so Take costs O(servers + taken·log n) however many
	// of its tasks are overdue. (With one heap for all, Take popped and
	// pushed back every overdue task of a full server on each call.)
	servers map[ServerRef]*serverQueue
	entries map[string]*dueEntry
	// epoch is what due times count from: an entry keeps nanoseconds
	// since it, not a time.Time (24 bytes, two per entry), and the clock
	// reading's monotonic part keeps the order when the wall clock steps.
	epoch time.Time
}

type serverQueue struct {
	server   ServerRef
	due      dueHeap
	inFlight int
}

// dueEntry is one task's: 48 bytes, one per open task (it was 112 with
// its server's ServerRef and two time.Time of its own).
type dueEntry struct {
	id    string
	queue *serverQueue // its server's
	at    int64        // since the epoch
	// pending is a time Set while the poll was in flight (0: none): Done
	// keeps it when it is sooner than the poll's own next.
	pending  int64
	index    int32 // position in its server's heap, -1 while in flight
	inFlight bool
}

// NewSchedule makes an empty schedule.
func NewSchedule(perServer int) *Schedule {
	return &Schedule{perServer: max(perServer, 1), servers: map[ServerRef]*serverQueue{}, entries: map[string]*dueEntry{}, epoch: time.Now()}
}

func (s *Schedule) queue(ref ServerRef) *serverQueue {
	q, ok := s.servers[ref]
	if !ok {
		q = &serverQueue{server: ref}
		s.servers[ref] = q
	}
	return q
}

// since is t as an entry keeps it, never 0 (which marks no pending time).
func (s *Schedule) since(t time.Time) int64 {
	if d := int64(t.Sub(s.epoch)); d != 0 {
		return d
	}
	return 1
}

func (s *Schedule) time(at int64) time.Time { return s.epoch.Add(time.Duration(at)) }

// Grow makes room for n more tasks: scheduling the thousands of open
// tasks found at start-up would otherwise rehash the index as it grows.
func (s *Schedule) Grow(n int) {
	grown := make(map[string]*dueEntry, len(s.entries)+n)
	maps.Copy(grown, s.entries)
	s.entries = grown
}

// Set (re)schedules a task's next poll. A task whose poll is in flight
// keeps the new time for after Done.
func (s *Schedule) Set(id string, server ServerRef, at time.Time) {
	e, ok := s.entries[id]
	if !ok {
		e = &dueEntry{id: id, queue: s.queue(server), index: -1}
		s.entries[id] = e
	}
	if e.inFlight {
		e.pending = s.since(at)
		return
	}
	e.at = s.since(at)
	q := e.queue
	switch {
	case e.index >= 0:
		heap.Fix(&q.due, int(e.index))
	default:
		heap.Push(&q.due, e)
	}
}

// AllDue makes every task due at now; one in flight keeps it for after
// its Done.
func (s *Schedule) AllDue(now time.Time) {
	for id, e := range s.entries {
		s.Set(id, e.queue.server, now)
	}
}

// Remove drops a task from the schedule (it ended, or was forgotten).
func (s *Schedule) Remove(id string) {
	e, ok := s.entries[id]
	if !ok {
		return
	}
	q := e.queue
	if e.index >= 0 {
		heap.Remove(&q.due, int(e.index))
	}
	if e.inFlight {
		q.inFlight--
	}
	delete(s.entries, id)
	if q.due.Len() == 0 && q.inFlight == 0 {
		delete(s.servers, q.server)
	}
}

// Take returns the tasks due at now whose server has room, earliest
// first, marking them in flight. A due task whose server is full waits
// for a Done.
func (s *Schedule) Take(now time.Time) []string {
	var taken []*dueEntry
	until := s.since(now)
	for _, q := range s.servers {
		for q.inFlight < s.perServer && q.due.Len() > 0 && q.due[0].at <= until {
			e := heap.Pop(&q.due).(*dueEntry)
			e.inFlight = true
			q.inFlight++
			taken = append(taken, e)
		}
	}
	slices.SortStableFunc(taken, func(a, b *dueEntry) int { return cmp.Compare(a.at, b.at) })
	ids := make([]string, len(taken))
	for i, e := range taken {
		ids[i] = e.id
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
	q := e.queue
	if e.inFlight {
		e.inFlight = false
		q.inFlight--
	}
	if next.IsZero() {
		s.Remove(id)
		return
	}
	e.at = s.since(next)
	if e.pending != 0 && e.pending < e.at {
		e.at = e.pending // a Set while in flight wants it sooner
	}
	e.pending = 0
	heap.Push(&q.due, e)
}

// Wake is when the earliest task whose server has room is due: the time
// a loop must wake to Take it. (A task waiting for a full server's slot
// is taken after a Done, not at a time.)
func (s *Schedule) Wake() (time.Time, bool) {
	var at int64
	ok := false
	for _, q := range s.servers {
		if q.inFlight < s.perServer && q.due.Len() > 0 && (!ok || q.due[0].at < at) {
			at, ok = q.due[0].at, true
		}
	}
	if !ok {
		return time.Time{}, false
	}
	return s.time(at), true
}

// Due is when a task is due, and whether its poll is in flight now.
func (s *Schedule) Due(id string) (at time.Time, inFlight, ok bool) {
	e, ok := s.entries[id]
	if !ok {
		return time.Time{}, false, false
	}
	return s.time(e.at), e.inFlight, true
}

// Len is the number of tasks scheduled or in flight.
func (s *Schedule) Len() int { return len(s.entries) }

// InFlight is the number of polls in flight.
func (s *Schedule) InFlight() int {
	n := 0
	for _, q := range s.servers {
		n += q.inFlight
	}
	return n
}

type dueHeap []*dueEntry

func (h dueHeap) Len() int           { return len(h) }
func (h dueHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h dueHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = int32(i), int32(j)
}
func (h *dueHeap) Push(x any) {
	e := x.(*dueEntry)
	e.index = int32(len(*h))
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
