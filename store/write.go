package store

import (
	"fmt"
	"strings"

	"github.com/taskdeck/taskdeck/model"
)

// ApplyUpdate runs an Update's fn on a copy of cur, the record as read,
// and checks what it made: the id never changes, the idempotency key only
// by being dropped where dropKey allows it (keyDropped), and the record
// must pass CheckRecord. next is nil when fn changed nothing. A change
// whose fn named no act (next.Act) is engine's; its new transitions and
// answers are attributed (model.Task.Attribute). Every backend's Update
// runs it.
func ApplyUpdate(cur *model.Task, fn func(t *model.Task) (changed bool, err error), dropKey bool, engine model.Actor) (next *model.Task, keyDropped bool, err error) {
	next = cur.Clone()
	next.Act = nil // the act of this change, if fn names one
	changed, err := fn(next)
	if err != nil || !changed {
		return nil, false, err
	}
	keyDropped = dropKey && next.IdempotencyKey == "" && cur.IdempotencyKey != ""
	if next.ID != cur.ID || next.IdempotencyKey != cur.IdempotencyKey && !keyDropped {
		return nil, false, fmt.Errorf("task %s: update may not change the id or the idempotency key", cur.ID)
	}
	if err := CheckRecord(next); err != nil {
		return nil, false, err
	}
	next.Attribute(cur, engine)
	return next, keyDropped, nil
}

// CheckRecord refuses records whose keys would be ambiguous; every backend
// runs it before a write.
func CheckRecord(t *model.Task) error {
	if t.ID == "" || strings.ContainsRune(t.ID, 0) {
		return fmt.Errorf("task id %q is empty or contains a zero byte", t.ID)
	}
	if _, err := model.ParseStatus(string(t.Status)); err != nil {
		return fmt.Errorf("task %s: %w", t.ID, err)
	}
	return nil
}
