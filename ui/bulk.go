package ui

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/taskdeck/taskdeck/present"
	"github.com/taskdeck/taskdeck/termtext"
)

// bulkWorkers bounds the Deck commands a bulk action has in flight: 2,000
// forgets go 16 at a time, not 2,000 at once nor one by one.
const bulkWorkers = 16

// cancelChunk is how many ids one CancelMany takes: the Deck bounds the
// cancels in flight per server, and the progress line moves per chunk.
const cancelChunk = 25

// bulkEvery is how often a running bulk action's progress line moves.
const bulkEvery = 100 * time.Millisecond

// bulkJob is one action on many tasks (cancel, forget, re-run), run
// through the Deck off the Update loop. Its counters are read by the
// progress line while the workers run.
type bulkJob struct {
	verb  string // "cancelling", as the progress line says it
	done  string // "cancel sent to", as the report says it
	total int
	ids   []string
	chunk int // ids per call of each
	// each does the work on a chunk of ids: one error per id.
	each func(ctx context.Context, ids []string) []error
	then func(m *Model) // after the report, on the Update loop; may be nil

	finished, failed atomic.Int64
	mu               sync.Mutex
	open             map[string]bool // the ids not done yet, which their rows say
	firstID          string          // the first id that failed, and how
	firstErr         error
}

type (
	// bulkTickMsg moves the progress line of a running job.
	bulkTickMsg struct{ job *bulkJob }
	// bulkDoneMsg says a job has run every one of its ids.
	bulkDoneMsg struct{ job *bulkJob }
)

// run does the job's work, bulkWorkers at a time; it is a command's
// body, so it runs on a goroutine of its own.
func (j *bulkJob) run(ctx context.Context) tea.Msg {
	next := make(chan []string)
	var wg sync.WaitGroup
	for range min(bulkWorkers, len(j.ids)) {
		wg.Go(func() {
			for ids := range next {
				errs := j.each(ctx, ids)
				j.mu.Lock()
				for i, id := range ids {
					delete(j.open, id)
					if errs[i] != nil {
						j.failed.Add(1)
						if j.firstErr == nil {
							j.firstID, j.firstErr = id, errs[i]
						}
					}
				}
				j.mu.Unlock()
				j.finished.Add(int64(len(ids)))
			}
		})
	}
	for ids := range slices.Chunk(j.ids, j.chunk) {
		next <- ids
	}
	close(next)
	wg.Wait()
	return bulkDoneMsg{job: j}
}

func bulkTick(j *bulkJob) tea.Cmd {
	return tea.Tick(bulkEvery, func(time.Time) tea.Msg { return bulkTickMsg{job: j} })
}

// startBulk runs each on every id, unless another bulk action still
// runs: one progress line at a time.
func (m *Model) startBulk(verb, done string, ids []string, chunk int, each func(ctx context.Context, ids []string) []error, then func(*Model)) tea.Cmd {
	if m.bulk != nil {
		m.say(fmt.Sprintf("wait: %s still runs (%s)", m.bulk.verb, m.bulkProgress()))
		return nil
	}
	j := &bulkJob{verb: verb, done: done, total: len(ids), ids: ids, chunk: chunk, each: each, then: then, open: make(map[string]bool, len(ids))}
	for _, id := range ids {
		j.open[id] = true
	}
	m.bulk = j
	ctx := m.ctx
	return tea.Batch(func() tea.Msg { return j.run(ctx) }, bulkTick(j))
}

// onBulk moves the progress line, and reports a job once it is over.
func (m *Model) onBulk(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case bulkTickMsg:
		if m.bulk == msg.job {
			return bulkTick(msg.job)
		}
	case bulkDoneMsg:
		j := msg.job
		if m.bulk == j {
			m.bulk = nil
		}
		ok := j.total - int(j.failed.Load())
		text := fmt.Sprintf("%s %s", j.done, present.Count(ok, "task"))
		if j.total == 1 && ok == 1 {
			text = fmt.Sprintf("%s task %s", j.done, j.ids[0])
		}
		if n := j.failed.Load(); n > 0 {
			j.mu.Lock()
			id, err := j.firstID, j.firstErr
			j.mu.Unlock()
			return m.fail(fmt.Errorf("%s; %d failed, the first (task %s): %s", text, n, id, termtext.Line(err.Error())))
		}
		m.say(text)
		if j.then != nil {
			j.then(m)
		}
	}
	return nil
}

// pending tells a task the running bulk action has not done yet.
func (m *Model) pending(id string) bool {
	if m.bulk == nil {
		return false
	}
	m.bulk.mu.Lock()
	defer m.bulk.mu.Unlock()
	return m.bulk.open[id]
}

// bulkProgress is a running job's progress: "340/2,000, 2 failed".
func (m *Model) bulkProgress() string {
	j := m.bulk
	s := fmt.Sprintf("%d/%d", j.finished.Load(), j.total)
	if n := j.failed.Load(); n > 0 {
		s += fmt.Sprintf(", %d failed", n)
	}
	return s
}

// cancelTasks sends tasks/cancel to each task through CancelMany, a
// chunk at a time (the Deck polls each soon after); the rows follow from
// the feed.
func (m *Model) cancelTasks(ids []string) tea.Cmd {
	d := m.deck
	return m.startBulk("cancelling", "cancel sent to", ids, cancelChunk, d.CancelMany, nil)
}

// forget deletes the records; their servers are not told.
func (m *Model) forget(ids []string) tea.Cmd {
	return m.startBulk("forgetting", "forgot", ids, 1, oneByOne(m.deck.Forget), nil)
}

// oneByOne makes a one-id command the work on a chunk of ids.
func oneByOne(fn func(ctx context.Context, id string) error) func(context.Context, []string) []error {
	return func(ctx context.Context, ids []string) []error {
		errs := make([]error, len(ids))
		for i, id := range ids {
			errs[i] = fn(ctx, id)
		}
		return errs
	}
}
