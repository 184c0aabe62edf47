// Package storefill builds large stores for benchmarks: many finished
// records and some open ones, as a year of use leaves them.
package storefill

import (
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store/badger"
)

// writers is how many goroutines create records at once: the store
// groups concurrent commits into one sync, so a large store fills in
// seconds rather than minutes.
const writers = 64

// Fill creates, in a new store at dir, open working records followed by
// finished completed ones, then closes the store.
func Fill(dir string, open, finished int) error {
	s, err := badger.Open(dir, nil)
	if err != nil {
		return err
	}
	total := open + finished
	base := time.Now().Add(-24 * time.Hour)
	var next atomic.Int64
	var once sync.Once
	var firstErr error
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= total {
					return
				}
				if err := s.Create(record(i, i < open, base)); err != nil {
					once.Do(func() { firstErr = err })
					return
				}
			}
		})
	}
	wg.Wait()
	if err := s.Close(); firstErr == nil {
		firstErr = err
	}
	return firstErr
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
