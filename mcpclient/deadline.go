package mcpclient

import (
	"context"
	"sync/atomic"
	"time"
)

// WithRequestTimeout is context.WithTimeout measured in this process's
// running time: the timeout is counted in steps of a timer re-armed after
// each, so a process that was stopped (SIGSTOP, a suspended machine)
// counts its whole stop as one step. A call whose answer arrived while it
// was stopped then reads that answer instead of giving up on it. Once the
// time is up, Err is context.DeadlineExceeded, and so is the cause that
// net/http reports, as with WithTimeout.
func WithRequestTimeout(parent context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	steps := max(10, int(d/time.Second))
	step := d / time.Duration(steps)
	inner, cancel := context.WithCancelCause(parent)
	c := &runningTimeout{Context: inner}
	go func() {
		t := time.NewTimer(step)
		defer t.Stop()
		for range steps {
			select {
			case <-t.C:
				t.Reset(step)
			case <-inner.Done():
				return
			}
		}
		c.timedOut.Store(true)
		cancel(context.DeadlineExceeded)
	}()
	return c, func() { cancel(nil) }
}

// runningTimeout is the context WithRequestTimeout returns.
type runningTimeout struct {
	context.Context
	timedOut atomic.Bool
}

func (c *runningTimeout) Err() error {
	err := c.Context.Err()
	if err != nil && c.timedOut.Load() {
		return context.DeadlineExceeded
	}
	return err
}
