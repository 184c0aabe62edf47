package badger

import (
	"hash/maphash"
	"sync"

	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store"
)

// recent keeps the records Get read last, decoded, so that an agent
// polling its own tasks, and the engine each open task it polls, read them
// from memory: a lookup that reaches Badger checks every level's tables
// and bloom filters, which cost more the bigger the store
// (BenchmarkGetAtScale). Every commit forgets the records it changed
// (runGroup), so a hit is what Badger would answer.
//
// A record is kept on its second read within the last recentMax misses:
// reads of records nobody reads again (a walk of old tasks, a guess) do
// not push out the ones an agent polls.
//
// Bound: recentMax records and recentBytes of their JSON, the oldest kept
// going first, and recentMax ids' hashes read once. Decoded, 1,899 records of 552 bytes (recentBytes full)
// took 2.6 MiB of heap.
type recent struct {
	mu sync.Mutex
	// gen counts forgets: a read that began before one may hold what the
	// commit replaced, so it is not kept (put).
	gen   uint64
	tasks map[string]kept
	bytes int // the JSON size of what tasks holds
	// ring holds the ids in the order they were kept. An id forgotten and
	// kept again holds two slots: the older one's eviction only costs a
	// miss.
	ring []string
	next int
	// once: the hashes of the ids last read once (onceRing, in order).
	once     map[uint64]struct{}
	onceRing []uint64
	onceNext int
}

type kept struct {
	t    *model.Task
	size int
}

const (
	recentMax   = 2048
	recentBytes = 1 << 20
	// recentMaxBytes: a bigger record is not kept, so that a few large
	// ones cannot push out every small one.
	recentMaxBytes = 4 << 10
)

// get returns a copy of the record kept for id, and the generation a
// read that finds nothing must give put.
func (r *recent) get(id string) (*model.Task, uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if k, ok := r.tasks[id]; ok {
		return k.t.Clone(), r.gen
	}
	return nil, r.gen
}

// put keeps a copy of t, read from size bytes of JSON by a read that
// began at generation gen, unless a commit changed records since.
func (r *recent) put(t *model.Task, size int, gen uint64) {
	if size > recentMaxBytes {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if gen != r.gen {
		return
	}
	if r.tasks == nil {
		r.tasks = make(map[string]kept)
		r.ring = make([]string, recentMax)
		r.once = make(map[uint64]struct{})
		r.onceRing = make([]uint64, recentMax)
	}
	if _, ok := r.tasks[t.ID]; ok || !r.readBefore(t.ID) {
		return
	}
	// Free the next slot, and the ones after it until the record fits;
	// a whole turn empties the ring, and size <= recentBytes.
	for {
		r.drop(r.ring[r.next])
		r.ring[r.next] = ""
		if r.bytes+size <= recentBytes {
			break
		}
		r.next = (r.next + 1) % recentMax
	}
	r.ring[r.next] = t.ID
	r.next = (r.next + 1) % recentMax
	r.tasks[t.ID] = kept{t.Clone(), size}
	r.bytes += size
}

// readBefore tells whether id was read once lately, and notes it if not.
func (r *recent) readBefore(id string) bool {
	h := maphash.String(recentSeed, id)
	if _, ok := r.once[h]; ok {
		delete(r.once, h)
		return true
	}
	delete(r.once, r.onceRing[r.onceNext])
	r.onceRing[r.onceNext] = h
	r.onceNext = (r.onceNext + 1) % recentMax
	r.once[h] = struct{}{}
	return false
}

var recentSeed = maphash.MakeSeed()

func (r *recent) drop(id string) {
	if k, ok := r.tasks[id]; ok {
		delete(r.tasks, id)
		r.bytes -= k.size
	}
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
		r.drop(c.ID)
	}
}
