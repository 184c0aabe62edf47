package engine

import (
	"cmp"
	"sync"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/model"
)

// The config's "retention" prunes finished tasks older than it (issue
// 25, item 14). Only an engine opened with Options.Retention runs it (the
// CLI's long-lived owners: serve and the dashboard), once at the start of
// its loop and then every retentionEvery. On a fleet every engine alive
// on the database could, and one does: the one whose name sorts first
// among the engines alive (the heartbeats the claims keep), so that a
// dead one's turn passes to the next within its heartbeat's lease.

// retentionEvery is how often the schedule runs.
const retentionEvery = time.Hour

type retainer struct {
	mu   sync.Mutex
	last deck.Retention // LastRun, LastPruned, LastError of this engine
	// runner is who prunes as this engine last saw it.
	runner string
}

// runRetention runs the schedule until the engine closes.
func (e *Engine) runRetention() {
	defer e.ops.Done()
	every := cmp.Or(e.opts.retentionEvery, retentionEvery)
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-e.ctx.Done():
			return
		case <-t.C:
		}
		next := every
		if !e.retain() {
			// A fleet's view of who is alive is not read yet: soon again.
			next = min(every, cmp.Or(e.opts.ClaimRenew, DefaultClaimRenew))
		}
		t.Reset(next)
	}
}

// retain prunes once if it is this engine's turn; false when it cannot
// tell yet whose turn it is.
func (e *Engine) retain() bool {
	_ = e.refreshConfig() // a refused edit leaves the version in use
	keep := e.config().Retention.Finished
	if keep == 0 {
		return true
	}
	runner := "this engine"
	if e.claims != nil {
		first, known := e.claims.FirstAlive()
		if !known {
			return false
		}
		if first != e.claims.Name() {
			e.retention.mu.Lock()
			e.retention.runner = first
			e.retention.mu.Unlock()
			return true
		}
	}
	ctx := deck.WithActor(e.ctx, model.EngineActor(e.host))
	n, err := e.tracker.Prune(ctx, keep)
	e.retention.mu.Lock()
	e.retention.runner = runner
	e.retention.last = deck.Retention{LastRun: time.Now(), LastPruned: n}
	if err != nil {
		e.retention.last.LastError = err.Error()
	}
	e.retention.mu.Unlock()
	if err != nil {
		e.log.Warn("retention: the prune failed; next try in an hour", "older than", keep, "err", err)
	} else {
		e.log.Info("retention: pruned finished tasks", "older than", keep, "pruned", n)
	}
	return true
}

// retentionState is the schedule as Servers reports it (nil: none set).
func (e *Engine) retentionState() *deck.Retention {
	keep := e.config().Retention.Finished
	if keep == 0 {
		return nil
	}
	e.retention.mu.Lock()
	defer e.retention.mu.Unlock()
	r := e.retention.last
	r.Finished = keep.String()
	if e.opts.Retention {
		r.Runner = e.retention.runner
	}
	return &r
}
