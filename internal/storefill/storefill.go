// Package storefill builds large stores for benchmarks: many finished
// records and some open ones, as a year of use leaves them.
package storefill

import (
	"encoding/json"
	"fmt"
	"iter"
	"time"

	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store/badger"
)

// Fill creates, in a new store at dir, open working records followed by
// finished completed ones, then closes the store. It writes them with
// badger.Load: as Create would, in minutes for ten million records.
func Fill(dir string, open, finished int) error {
	n, err := badger.Load(dir, Records(open, finished))
	if err == nil && n != open+finished {
		err = fmt.Errorf("store %s: %d records written of %d", dir, n, open+finished)
	}
	return err
}

// Records yields the records Fill writes, in increasing id order: open
// working records, then finished completed ones, a millisecond apart.
func Records(open, finished int) iter.Seq[*model.Task] {
	return func(yield func(*model.Task) bool) {
		base := time.Now().Add(-time.Duration(open+finished)*time.Millisecond - time.Hour)
		for i := range open + finished {
			if !yield(record(i, i < open, base)) {
				return
			}
		}
	}
}

// record is one record as taskdeck keeps it: a handle, its history, and
// for a finished task a small result.
func record(i int, open bool, base time.Time) *model.Task {
	at := base.Add(time.Duration(i) * time.Millisecond)
	args := json.RawMessage(fmt.Sprintf(`{"seconds":%d,"note":"benchmark record %d"}`, i%600, i))
	rec := model.NewIntent(model.ServerRef{Name: "demo"}, "sleep", args, "", at)
	rec.TaskID = fmt.Sprintf("TASK%028d", i)
	_ = rec.MoveTo(model.StatusWorking, "", at.Add(time.Millisecond))
	if !open {
		_ = rec.MoveTo(model.StatusCompleted, "", at.Add(time.Second))
		rec.Result = json.RawMessage(fmt.Sprintf(`{"content":[{"type":"text","text":"slept %d s"}]}`, i%600))
	}
	return rec
}
