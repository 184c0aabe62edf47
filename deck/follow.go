package deck

import (
	"context"
	"sync"
)

// WatchFunc starts a feed from a revision: a Deck's Watch, or its
// WatchWindow with the window bound.
type WatchFunc func(ctx context.Context, from uint64) (Feed, error)

// ResumeFunc decides, when a followed feed ended with err (nil: it
// closed without a cause) or watching again failed with err, whether to
// watch again. It may wait first (a backoff), and returns false if ctx
// ends meanwhile.
type ResumeFunc func(ctx context.Context, err error) bool

// Following is a feed that Follow keeps up across the feeds it watches.
type Following struct {
	ch  chan Event
	mu  sync.Mutex
	rev uint64
	err error
}

// Follow watches from revision from and delivers the events on one feed
// that outlives the feeds watch returns: when one ends and resume says
// so, it watches again from the last revision it delivered, so its
// reader misses nothing and sees nothing twice. The first watch's error
// is returned; the feed ends when ctx does (Err nil, or ctx's cause if
// that is not the plain cancellation) or when resume says no (Err the
// feed's last error). The dashboard, the proxy's hub and the service's
// failover all follow the feed through it.
func Follow(ctx context.Context, from uint64, watch WatchFunc, resume ResumeFunc) (*Following, error) {
	inner, err := watch(ctx, from)
	if err != nil {
		return nil, err
	}
	f := &Following{ch: make(chan Event, 64), rev: from}
	go f.run(ctx, inner, watch, resume)
	return f, nil
}

// Events delivers the events of every feed followed, in revision order.
func (f *Following) Events() <-chan Event { return f.ch }

// Err tells why the feed ended, once Events is closed.
func (f *Following) Err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

// Rev is the revision a watch resumes from: that of the last change or
// whole snapshot delivered (a snapshot cut before its last part is read
// again).
func (f *Following) Rev() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rev
}

func (f *Following) run(ctx context.Context, inner Feed, watch WatchFunc, resume ResumeFunc) {
	defer close(f.ch)
	for {
		for ev := range inner.Events() {
			if ev.Kind == EventChange || (ev.Kind == EventSnapshot || ev.Kind == EventSnapshotMore) && !ev.More {
				f.mu.Lock()
				f.rev = ev.Rev
				f.mu.Unlock()
			}
			select {
			case f.ch <- ev:
			case <-ctx.Done():
				f.end(ctx, nil)
				return
			}
		}
		err := inner.Err()
		for {
			if ctx.Err() != nil || !resume(ctx, err) {
				f.end(ctx, err)
				return
			}
			if inner, err = watch(ctx, f.Rev()); err == nil {
				break
			}
		}
	}
}

// end sets why the feed ended: ctx's end is no error unless its cause
// says more than that it was canceled.
func (f *Following) end(ctx context.Context, err error) {
	if ctx.Err() != nil {
		err = nil
		if cause := context.Cause(ctx); cause != ctx.Err() {
			err = cause
		}
	}
	f.mu.Lock()
	f.err = err
	f.mu.Unlock()
}
