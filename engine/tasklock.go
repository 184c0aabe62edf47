package engine

import "sync"

// taskLocks serialise the steps taken on one task (a poll, an answer, a
// cancel, a forget): two of them at once could send the same pending
// answers twice or race on its record. Steps on different tasks run in
// parallel.
type taskLocks struct {
	mu    sync.Mutex
	locks map[string]*taskLock
}

type taskLock struct {
	sync.Mutex
	users int
}

// lock takes the lock of one task and returns its unlock.
func (l *taskLocks) lock(id string) (unlock func()) {
	l.mu.Lock()
	if l.locks == nil {
		l.locks = map[string]*taskLock{}
	}
	tl, ok := l.locks[id]
	if !ok {
		tl = &taskLock{}
		l.locks[id] = tl
	}
	tl.users++
	l.mu.Unlock()
	tl.Lock()
	return func() {
		tl.Unlock()
		l.mu.Lock()
		if tl.users--; tl.users == 0 {
			delete(l.locks, id)
		}
		l.mu.Unlock()
	}
}
