package ui

import (
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/model"
)

// benchTasks makes n tasks in a realistic mix: most finished, some open.
func benchTasks(n int) []*model.Task {
	statuses := []model.Status{model.StatusCompleted, model.StatusCompleted, model.StatusCompleted, model.StatusWorking,
		model.StatusFailed, model.StatusCancelled, model.StatusInputRequired, model.StatusCompleted}
	tasks := make([]*model.Task, n)
	for i := range tasks {
		at := fixedNow.Add(-time.Duration(n-i) * time.Second)
		t := model.NewIntent(model.ServerRef{Name: fmt.Sprintf("server-%d", i%4)}, fmt.Sprintf("tool-%d", i%17), nil, "", at)
		t.ID = fmt.Sprintf("%010d", i)
		t.TaskID = "task-" + t.ID // the server's handle: an open task can be cancelled
		t.Status = statuses[i%len(statuses)]
		t.StatusMessage = fmt.Sprintf("step %d of %d", i%7, 7)
		if t.Status == model.StatusInputRequired { // it waits for an answer: the inbox holds it
			t.InputRequests = map[string]model.InputRequest{"ok": {Method: "elicitation/create",
				Params: []byte(`{"message":"Go on?","requestedSchema":{"type":"object","properties":{"ok":{"type":"boolean"}}}}`)}}
		}
		tasks[i] = t
	}
	return tasks
}

// perOp remembers each benchmark's cost at the smallest size, so that
// larger sizes report their cost as a ratio to it (same process, same run).
var perOp sync.Map

// The sizes the benchmarks run at: the everyday keys from a small list
// up, and the keys that go through every row at 100,000 (the budget) and
// 1,000,000, given against it.
var (
	everyday = []int{100, 10_000, 100_000}
	large    = []int{100_000, 1_000_000}
)

func benchSizes(b *testing.B, op func(m *Model, tasks []*model.Task, i int)) {
	benchAt(b, everyday, op)
}

func benchAt(b *testing.B, sizes []int, op func(m *Model, tasks []*model.Task, i int)) {
	for _, n := range sizes {
		b.Run(fmt.Sprintf("tasks=%d", n), func(b *testing.B) {
			tasks := benchTasks(n)
			m := loaded(b, tasks, 120, 40)
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := cpuTime(b)
			for i := range b.N {
				op(m, tasks, i)
				_ = m.View()
			}
			// CPU time, GC's included: on a loaded machine the wall time
			// also counts the waits for a core.
			b.ReportMetric(float64((cpuTime(b)-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/op")
			ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			if n == sizes[0] {
				perOp.Store(b.Name(), ns)
			} else if base, ok := perOp.Load(fmt.Sprintf("%s/tasks=%d", parentName(b.Name()), sizes[0])); ok {
				b.ReportMetric(ns/base.(float64), fmt.Sprintf("x_vs_%d", sizes[0]))
			}
		})
	}
}

// cpuTime is the CPU time the process has used.
func cpuTime(b testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
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
	benchAt(b, large, func(m *Model, _ []*model.Task, i int) { m.Update(keys[i%2]) })
}

// BenchmarkSearchFinished is one letter of a search over finished tasks
// typed into the filter prompt: every row is matched again.
func BenchmarkSearchFinished(b *testing.B) {
	keys := []tea.KeyPressMsg{{Code: '3', Text: "3"}, {Code: tea.KeyBackspace}}
	benchAt(b, large, func(m *Model, _ []*model.Task, i int) {
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
	benchAt(b, large, func(m *Model, _ []*model.Task, i int) { m.Update(keys[i%2]) })
}

// BenchmarkMarkAllCancel, in the open group: ctrl+a, c (the question
// to cancel every marked task), esc (not sent: no server runs), U.
func BenchmarkMarkAllCancel(b *testing.B) {
	keys := []tea.KeyPressMsg{{Code: 'a', Mod: tea.ModCtrl}, {Code: 'c', Text: "c"}, {Code: tea.KeyEscape}, {Code: 'U', Text: "U"}}
	benchAt(b, large, func(m *Model, _ []*model.Task, i int) {
		if i == 0 {
			m.Update(tea.KeyPressMsg{Code: '1', Text: "1"})
		}
		m.Update(keys[i%len(keys)])
	})
}
