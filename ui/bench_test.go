package ui

import (
	"fmt"
	"sync"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/internal/cputime"
	"github.com/taskdeck/taskdeck/model"
)

// benchTasks makes n tasks in a realistic mix: most finished, some open.
func benchTasks(n int) []*model.Task {
	statuses := []model.Status{model.StatusCompleted, model.StatusCompleted, model.StatusCompleted, model.StatusWorking,
		model.StatusFailed, model.StatusCancelled, model.StatusInputRequired, model.StatusCompleted}
	tasks := make([]*model.Task, n)
	for i := range tasks {
		tasks[i] = benchTask(i, n, statuses[i%len(statuses)])
	}
	return tasks
}

// benchTask is task i of n (the oldest first), of a status.
func benchTask(i, n int, st model.Status) *model.Task {
	at := fixedNow.Add(-time.Duration(n-i) * time.Second)
	t := model.NewIntent(model.ServerRef{Name: fmt.Sprintf("server-%d", i%4)}, fmt.Sprintf("tool-%d", i%17), nil, "", at)
	t.ID = fmt.Sprintf("%010d", i)
	t.TaskID = "task-" + t.ID // the server's handle: an open task can be cancelled
	t.Status = st
	t.StatusMessage = fmt.Sprintf("step %d of %d", i%7, 7)
	if t.Status == model.StatusInputRequired { // it waits for an answer: the inbox holds it
		t.InputRequests = map[string]model.InputRequest{"ok": {Method: "elicitation/create",
			Params: []byte(`{"message":"Go on?","requestedSchema":{"type":"object","properties":{"ok":{"type":"boolean"}}}}`)}}
	}
	return t
}

// benchOpen is how many tasks are open in the large stores (the issue's
// store of 1,000,000 records has 10,000): what grows is the finished ones.
const benchOpen = 10_000

// storeStatus is the status of record i of a large store of n: one in
// n/benchOpen open (working or waiting), the others finished.
func storeStatus(i, n int) model.Status {
	if every := n / benchOpen; i%every == 0 {
		return []model.Status{model.StatusWorking, model.StatusInputRequired}[(i/every)%2]
	}
	return []model.Status{model.StatusCompleted, model.StatusCompleted, model.StatusCompleted, model.StatusFailed, model.StatusCancelled}[i%5]
}

// loadAll is the dashboard holding n tasks, every one (the everyday sizes).
func loadAll(b *testing.B, n int) (*Model, []*model.Task) {
	tasks := benchTasks(n)
	return loaded(b, tasks, 120, 40), tasks
}

// loadWindow is the dashboard on a store of n records (benchOpen open) as
// WatchWindow and its background reads leave it: every open task, the
// newest Options.Recent finished ones, and the store's counts per status.
// Only the records it holds are made.
func loadWindow(b *testing.B, n int) (*Model, []*model.Task) {
	m := loaded(b, nil, 120, 40)
	counts := map[model.Status]int{}
	var held []*model.Task
	finished := 0
	for i := n - 1; i >= 0; i-- { // the newest first
		st := storeStatus(i, n)
		counts[st]++
		if !st.Terminal() || finished < m.opts.Recent {
			held = append(held, benchTask(i, n, st))
		}
		if st.Terminal() {
			finished++
		}
	}
	entries := make([]deck.Entry, len(held))
	for i, t := range held {
		entries[i] = deck.Entry{Task: t}
	}
	m.Update(feedMsg{events: []deck.Event{{Kind: deck.EventSnapshot, Rev: 2, Entries: entries, Counts: counts}}})
	if m.hidden != n-len(held) {
		b.Fatalf("the window leaves %d records out, want %d", m.hidden, n-len(held))
	}
	return m, held
}

// perOp remembers each benchmark's cost at the smallest size, so that
// larger sizes report their cost as a ratio to it (same process, same run).
var perOp sync.Map

// The sizes the benchmarks run at: the everyday keys from a small list
// up (every task held), and the keys that go through every row held on a
// store of 100,000 records (the budget) and 1,000,000, given against it
// (loadWindow: the dashboard holds a window of those).
var (
	everyday = []int{100, 10_000, 100_000}
	large    = []int{100_000, 1_000_000}
)

func benchSizes(b *testing.B, op func(m *Model, tasks []*model.Task, i int)) {
	benchAt(b, everyday, loadAll, op)
}

// benchLarge runs op on the dashboard of a store of each large size.
func benchLarge(b *testing.B, op func(m *Model, tasks []*model.Task, i int)) {
	benchAt(b, large, loadWindow, op)
}

func benchAt(b *testing.B, sizes []int, load func(*testing.B, int) (*Model, []*model.Task), op func(m *Model, tasks []*model.Task, i int)) {
	for _, n := range sizes {
		b.Run(fmt.Sprintf("tasks=%d", n), func(b *testing.B) {
			m, tasks := load(b, n)
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := cputime.Used(b)
			for i := range b.N {
				op(m, tasks, i)
				_ = m.View()
			}
			// CPU time, GC's included: on a loaded machine the wall time
			// also counts the waits for a core.
			b.ReportMetric(float64((cputime.Used(b)-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/op")
			ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			if n == sizes[0] {
				perOp.Store(b.Name(), ns)
			} else if base, ok := perOp.Load(fmt.Sprintf("%s/tasks=%d", parentName(b.Name()), sizes[0])); ok {
				b.ReportMetric(ns/base.(float64), fmt.Sprintf("x_vs_%d", sizes[0]))
			}
		})
	}
}

func parentName(name string) string {
	for i := len(name) - 1; i >= 0; i-- {
		if name[i] == '/' {
			return name[:i]
		}
	}
	return name
}

// BenchmarkKeypress is one key (cursor down) through Update and View.
func BenchmarkKeypress(b *testing.B) {
	down := tea.KeyPressMsg{Code: tea.KeyDown}
	benchSizes(b, func(m *Model, _ []*model.Task, _ int) { m.Update(down) })
}

// BenchmarkPollResult is one poll's answer from the feed (a changed task
// that moves in the sort order) through Update and View.
func BenchmarkPollResult(b *testing.B) {
	benchSizes(b, func(m *Model, tasks []*model.Task, i int) {
		t := tasks[(i*7919)%len(tasks)].Clone()
		t.StatusMessage = fmt.Sprintf("poll %d", i)
		t.UpdatedAt = fixedNow.Add(time.Duration(i) * time.Millisecond)
		m.Update(feedMsg{events: []deck.Event{{Kind: deck.EventChange, Rev: uint64(i + 2), Entries: []deck.Entry{{Task: t, Poll: deck.PollState{Next: fixedNow.Add(time.Second)}}}}}})
	})
}

// BenchmarkInbox is one key (cursor down) in the inbox, through Update
// and View: its rows are ordered by how long they have waited.
func BenchmarkInbox(b *testing.B) {
	down := tea.KeyPressMsg{Code: tea.KeyDown}
	benchSizes(b, func(m *Model, _ []*model.Task, i int) {
		if i == 0 {
			m.Update(tea.KeyPressMsg{Code: '2', Text: "2"})
		}
		m.Update(down)
	})
}

// BenchmarkGroups is one group key (1 to 4 and 0 in turn) through Update
// and View: each is a re-filter of every row (the inbox a re-sort).
func BenchmarkGroups(b *testing.B) {
	keys := []rune{'1', '2', '3', '4', '0'}
	benchSizes(b, func(m *Model, _ []*model.Task, i int) {
		k := keys[i%len(keys)]
		m.Update(tea.KeyPressMsg{Code: k, Text: string(k)})
	})
}

// BenchmarkPaletteKey is one letter typed into the open command palette
// (it narrows the actions) through Update and View.
func BenchmarkPaletteKey(b *testing.B) {
	keys := []tea.KeyPressMsg{{Code: 'r', Text: "r"}, {Code: tea.KeyBackspace}}
	benchSizes(b, func(m *Model, _ []*model.Task, i int) {
		if m.palette == nil {
			m.Update(tea.KeyPressMsg{Code: ':', Text: ":"})
		}
		m.Update(keys[i%2])
	})
}

// BenchmarkSearchKey is one letter of a field search typed into the
// filter prompt: every row is matched again.
func BenchmarkSearchKey(b *testing.B) {
	keys := []tea.KeyPressMsg{{Code: '3', Text: "3"}, {Code: tea.KeyBackspace}}
	benchSizes(b, func(m *Model, _ []*model.Task, i int) {
		if !m.filtering {
			m.Update(tea.KeyPressMsg{Code: '/', Text: "/"})
			m.filter.SetValue("tool:tool-1 status:work")
			m.filter.CursorEnd()
		}
		m.Update(keys[i%2])
	})
}

// BenchmarkMarkAll is ctrl+a then U on every row shown.
func BenchmarkMarkAll(b *testing.B) {
	keys := []tea.KeyPressMsg{{Code: 'a', Mod: tea.ModCtrl}, {Code: 'U', Text: "U"}}
	benchSizes(b, func(m *Model, _ []*model.Task, i int) { m.Update(keys[i%2]) })
}

// BenchmarkBottomKey is G (to the last row) then g (back to the first)
// in turn, through Update and View.
func BenchmarkBottomKey(b *testing.B) {
	keys := []tea.KeyPressMsg{{Code: 'G', Text: "G"}, {Code: 'g', Text: "g"}}
	benchLarge(b, func(m *Model, _ []*model.Task, i int) { m.Update(keys[i%2]) })
}

// BenchmarkSearchFinished is one letter of a search over finished tasks
// typed into the filter prompt: every row is matched again.
func BenchmarkSearchFinished(b *testing.B) {
	keys := []tea.KeyPressMsg{{Code: '3', Text: "3"}, {Code: tea.KeyBackspace}}
	benchLarge(b, func(m *Model, _ []*model.Task, i int) {
		if !m.filtering {
			m.Update(tea.KeyPressMsg{Code: '/', Text: "/"})
			m.filter.SetValue("tool:tool-1 status:completed")
			m.filter.CursorEnd()
		}
		m.Update(keys[i%2])
	})
}

// BenchmarkGroupFinished is the finished group's key (3) and every
// task's (0) in turn, through Update and View.
func BenchmarkGroupFinished(b *testing.B) {
	keys := []tea.KeyPressMsg{{Code: '3', Text: "3"}, {Code: '0', Text: "0"}}
	benchLarge(b, func(m *Model, _ []*model.Task, i int) { m.Update(keys[i%2]) })
}

// BenchmarkMarkAllCancel, in the open group: ctrl+a, c (the question
// to cancel every marked task), esc (not sent: no server runs), U.
func BenchmarkMarkAllCancel(b *testing.B) {
	keys := []tea.KeyPressMsg{{Code: 'a', Mod: tea.ModCtrl}, {Code: 'c', Text: "c"}, {Code: tea.KeyEscape}, {Code: 'U', Text: "U"}}
	benchLarge(b, func(m *Model, _ []*model.Task, i int) {
		if i == 0 {
			m.Update(tea.KeyPressMsg{Code: '1', Text: "1"})
		}
		m.Update(keys[i%len(keys)])
	})
}
