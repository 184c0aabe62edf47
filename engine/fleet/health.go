package fleet

import (
	"sync"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/store"
	"github.com/taskdeck/taskdeck/termtext"
)

// Health is what an engine knows of its shared database's reach: the
// last word of its listener (dropped, connected again) and of every
// request (a connection error, or an answer). While it is lost the loop
// starts no poll (a result it could not write would be wasted) and keeps
// its schedule; the listener's reconnect, or any answer, brings it back.
// Badger has none (a nil *Health): its failures are its disk's.
type Health struct {
	wake chan struct{} // the loop looks again at once

	mu   sync.Mutex
	down *deck.Store // nil while up
	tell func(deck.Store)
}

// NewHealth is a health, up, that tells every change to tell, in order.
func NewHealth(tell func(deck.Store)) *Health {
	return &Health{wake: make(chan struct{}, 1), tell: tell}
}

// Wake is signalled on every change, so that the loop looks again at
// once; nil (never) without a health.
func (h *Health) Wake() <-chan struct{} {
	if h == nil {
		return nil
	}
	return h.wake
}

// Lost tells whether the store is lost now (false without a health).
func (h *Health) Lost() bool {
	if h == nil {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.down != nil
}

// Note takes the outcome of one request to the database: a connection
// error says it is lost, anything else (an answer, even a refusal) that
// it is up. A change is told at once, in order.
func (h *Health) Note(err error) {
	if h == nil {
		return
	}
	lost := store.Unreachable(err)
	h.mu.Lock()
	defer h.mu.Unlock()
	if lost == (h.down != nil) {
		return
	}
	st := deck.Store{Up: !lost, Since: time.Now()}
	if lost {
		st.Error = termtext.OneLine(err.Error(), 300)
		h.down = &st
	} else {
		h.down = nil
	}
	h.tell(st)
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// Listened is the listener's word: dropped with err, or connected (nil).
// A listener that failed on something else than its connection says
// nothing of the database's reach.
func (h *Health) Listened(err error) {
	if err == nil || store.Unreachable(err) {
		h.Note(err)
	}
}
