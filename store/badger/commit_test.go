package badger

import (
	"github.com/taskdeck/taskdeck/store"

	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/model"
)

// Group commit must keep every caller's outcome its own: concurrent
// increments of one record lose none, and of many Creates racing on one
// idempotency key exactly one wins, while the others' unrelated records
// in the same groups commit.
func TestGroupCommitKeepsSerialOutcomes(t *testing.T) {
	s, err := Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	counter := benchRecord(0, true)
	counter.IdempotencyKey = ""
	counter.StatusMessage = "0"
	if err := s.Create(counter); err != nil {
		t.Fatal(err)
	}
	const workers, rounds = 16, 20
	var wg sync.WaitGroup
	var dupes, wins sync.Map
	for w := range workers {
		wg.Go(func() {
			for r := range rounds {
				if _, err := s.Update(counter.ID, func(t *model.Task) (bool, error) {
					n, err := strconv.Atoi(t.StatusMessage)
					t.StatusMessage = strconv.Itoa(n + 1)
					return true, err
				}); err != nil {
					t.Error(err)
					return
				}
				rec := model.NewIntent(model.ServerRef{Name: "x"}, "tool", nil, fmt.Sprintf("shared-%d", r), time.Now())
				err := s.Create(rec)
				var dup *store.DuplicateKeyError
				switch {
				case err == nil:
					if _, loaded := wins.LoadOrStore(r, w); loaded {
						t.Errorf("round %d: two Creates won one key", r)
					}
				case errors.As(err, &dup):
					dupes.Store(fmt.Sprint(r, w), true)
				default:
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	got, err := s.Get(counter.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.StatusMessage != strconv.Itoa(workers*rounds) {
		t.Errorf("counter is %s after %d increments: updates were lost", got.StatusMessage, workers*rounds)
	}
	for r := range rounds {
		if _, ok := wins.Load(r); !ok {
			t.Errorf("round %d: no Create won", r)
		}
		if _, err := s.ByKey(fmt.Sprintf("shared-%d", r)); err != nil {
			t.Errorf("round %d: %v", r, err)
		}
	}
	if n := Writes(s); n != int64(2+workers*rounds+rounds) { // + the schema key and the counter
		t.Errorf("writes = %d, want %d (one per successful commit call)", n, 2+workers*rounds+rounds)
	}
}
