package badger

import (
	"sync"

	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store"
)

// recent keeps the records Get read last, decoded, so that an agent
// polling its own tasks reads them from memory: a lookup that reaches
// Badger checks every level's tables and bloom filters, which cost more
// the bigger the store (BenchmarkGetAtScale). Every commit forgets the
// records it changed (runGroup), so a hit is what Badger would answer.
//
// Bound: recentMax records of at most recentMaxBytes of JSON each (8 MiB
// at most, a few hundred KiB for records of ~300 bytes).
type recent struct {
	mu sync.Mutex
	// gen counts forgets: a read that began before one may hold what the
	// commit replaced, so it is not kept (put).
	gen   uint64
	tasks map[string]*model.Task
	// ring holds the ids in the order they were kept; the oldest goes
	// when a new one comes. An id forgotten and kept again holds two
	// slots: the older one's eviction only costs a miss.
	ring []string
	next int
}

const (
	recentMax      = 2048
	recentMaxBytes = 4 << 10
)

// get returns a copy of the record kept for id, and the generation a
// read that finds nothing must give put.
func (r *recent) get(id string) (*model.Task, uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if t, ok := r.tasks[id]; ok {
		return t.Clone(), r.gen
	}
	return nil, r.gen
}

// put keeps a copy of t, read from size bytes of JSON by a read that
// began at generation gen, unless a commit changed records since.
func (r *recent) put(t *model.Task, size int, gen uint64) {
	if size > recentMaxBytes {
		return
	}
	c := t.Clone()
	r.mu.Lock()
	defer r.mu.Unlock()
	if gen != r.gen {
		return
	}
	if r.tasks == nil {
		r.tasks = make(map[string]*model.Task, recentMax)
		r.ring = make([]string, recentMax)
	}
	if _, ok := r.tasks[t.ID]; ok {
		return
	}
	if old := r.ring[r.next]; old != "" {
		delete(r.tasks, old)
	}
	r.ring[r.next] = t.ID
	r.next = (r.next + 1) % recentMax
	r.tasks[t.ID] = c
}

// forget drops the records a commit changed.
func (r *recent) forget(changes []store.Change) {
	if len(changes) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.gen++
	for _, c := range changes {
		delete(r.tasks, c.ID)
	}
}
