package engine

import (
	"time"

	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store"
	"github.com/taskdeck/taskdeck/tracing"
)

// spanWrites is a store whose writes emit a task's long span when they
// end the task: whichever process writes the end emits it (tracing's
// ids make it the same span in every process).
type spanWrites struct {
	store.Backend
	spans *tracing.Tracer
	now   func() time.Time // nil: time.Now
}

func (s spanWrites) Update(id string, fn func(t *model.Task) (bool, error)) (*model.Task, error) {
	return endSpan(s.spans, s.now, s.Backend.Update, id, fn)
}

// endSpan runs the write fn of the record id through write and emits the
// task's span if the write ended the task (its end at now(); nil: time.Now).
func endSpan(spans *tracing.Tracer, now func() time.Time, write func(string, func(*model.Task) (bool, error)) (*model.Task, error),
	id string, fn func(*model.Task) (bool, error)) (*model.Task, error) {
	var was model.Status
	rec, err := write(id, func(r *model.Task) (bool, error) {
		was = r.Status // the record as this (last) try read it
		return fn(r)
	})
	if err == nil && rec != nil && was != "" && !was.Terminal() && rec.Status.Terminal() {
		if now == nil {
			now = time.Now
		}
		spans.TaskEnded(rec, ServerLabel(rec.Server), now())
	}
	return rec, err
}
