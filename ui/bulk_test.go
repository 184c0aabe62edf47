package ui

import (
	"errors"
	"fmt"
	"github.com/taskdeck/taskdeck/deck/decktest"
	"github.com/taskdeck/taskdeck/internal/cputime"
	"strings"
	"sync"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/model"
)

var ctrlA = tea.KeyPressMsg{Code: 'a', Mod: tea.ModCtrl}

// Mark all marks what the filter shows (mark by filter), a range mark
// marks from the last space to the cursor, U clears, and an action
// acts only on marked rows the filter still shows, saying so.
func TestMarkAllByFilterRangeAndClear(t *testing.T) {
	tasks := sampleTasks()
	m := loaded(t, tasks, 120, 30)
	for _, k := range []string{"/", "s", "t", "a", "t", "u", "s", ":", "w", "o", "r", "k", "enter"} {
		press(m, k)
	}
	if len(m.list.visible) != 2 {
		t.Fatalf("status:work shows %d rows, want the 2 working", len(m.list.visible))
	}
	m.Update(ctrlA)
	if len(m.marked) != 2 || !strings.Contains(m.flash, "marked all 2 tasks shown") {
		t.Fatalf("ctrl+a marked %d (%q), want the 2 shown", len(m.marked), m.flash)
	}
	press(m, "U")
	if len(m.marked) != 0 {
		t.Fatalf("U left %d marks", len(m.marked))
	}

	// A range: space on the first row, down three, V.
	m.filter.SetValue("")
	m.applyFilter()
	m.cursor = 0
	press(m, "space") // marks row 1, moves to row 2
	m.moveCursor(2)
	press(m, "V")
	for i, r := range m.list.visible[:4] {
		if !m.marked[r.task.ID] {
			t.Fatalf("row %d not marked by the range", i+1)
		}
	}
	if len(m.marked) != 4 {
		t.Fatalf("%d marked, want rows 1 to 4", len(m.marked))
	}

	// A filter that hides two of the four: the question says they are
	// left alone and lists only the two shown.
	shown := m.list.visible[:4]
	press(m, "/")
	for _, r := range shown[0].task.ID {
		press(m, string(r))
	}
	press(m, "enter")
	press(m, "d")
	s := screenOf(m)
	if !strings.Contains(s, "Forget 1 task?") || !strings.Contains(s, "3 marked tasks the filter hides are left alone") {
		t.Fatalf("the question:\n%s", s)
	}
}

// Cancelling 2,000 tasks is three keys (ctrl+a, c, y), shows its
// progress while it runs (the top line counts, each row not done yet
// says cancelling…), and ends on the rows within 10 s on loopback
// (500 under the race detector, which slows launching them tenfold).
func TestCancelOf2000ShowsProgressAndFinishes(t *testing.T) {
	n := 2000
	if raceEnabled {
		n = 500
	}
	// At the real speed each sleep reports once a second, as a long tool
	// would: at the harness's 20× speed 2,000 of them made 40,000 changes
	// a second, whose polls, writes and JSON (the demo server runs in this
	// process) took most of the two cores, and the cancels waited for them.
	h := newHarnessWith(t, demo.Options{Speed: 1}, func(h *harness) {
		var wg sync.WaitGroup
		next := make(chan int)
		for range 16 {
			wg.Go(func() {
				for range next {
					h.call("sleep", `{"seconds":150}`)
				}
			})
		}
		for i := range n {
			next <- i
		}
		close(next)
		wg.Wait()
	})
	h.until("2,000 rows", func(m *Model) bool { return m.list.Len() == n })
	h.send(ctrlA)
	h.key("c")
	s := h.screen()
	if !strings.Contains(s, fmt.Sprintf("Cancel %d tasks on the server?", n)) || !strings.Contains(s, fmt.Sprintf("… and %d more", n-maxTargets)) {
		t.Fatalf("the question:\n%s", s)
	}
	start, cpu0 := time.Now(), cputime.Used(t)
	h.key("y")
	var progress string
	h.until("the progress line", func(m *Model) bool {
		if l := lineWith(h.screen(), "cancelling "); l != "" && m.bulk != nil && m.bulk.finished.Load() > 0 && strings.Contains(h.screen(), "cancelling…") {
			progress = l
			return true
		}
		return false
	})
	// The target is 10 s (2.0 to 3.9 s here at load 8 to 10); the bound is twice that, as
	// seven engineers share two cores: it still fails a silent minute.
	limit := 20 * time.Second
	if raceEnabled {
		limit *= 2
	}
	// The report as the job ends: the start-up reconcile's may follow it.
	var report string
	var acked time.Duration
	h.within("2,000 rows cancelled", limit, func(m *Model) bool {
		if m.bulk == nil && report == "" {
			report, acked = m.flash, time.Since(start)
		}
		return m.list.counts[model.StatusCancelled] == n && m.bulk == nil
	})
	took, cpu := time.Since(start), cputime.Used(t)-cpu0
	t.Logf("cancel of %d: %v (the last acknowledged at %v), CPU %v (the demo server's included); a progress line: %q", n, took, acked, cpu, strings.TrimSpace(progress))
	if s := h.screen(); strings.Contains(s, "cancelling…") {
		t.Fatalf("rows still say cancelling… after the cancel:\n%s", s)
	}
	if !strings.Contains(report, fmt.Sprintf("cancel sent to %d tasks", n)) {
		t.Fatalf("the report says %q", report)
	}
	if got := h.demo.Stats().Cancels; got != n {
		t.Fatalf("the server got %d tasks/cancel, want %d", got, n)
	}
}

// A bulk action that fails on some tasks says how many and the first.
func TestBulkFailuresAreCountedAndTheFirstNamed(t *testing.T) {
	d := decktest.New(nil)
	var ids []string
	for range 3 {
		res, err := d.Call(t.Context(), deck.CallRequest{Server: model.ServerRef{Name: "demo"}, Tool: "sleep"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.Task.ID)
	}
	d.Refuse(ids[1], errors.New("refused by the test"))
	h := newDeckHarness(t, d, Options{})
	h.send(ctrlA)
	h.key("c", "y")
	h.until("the report", func(m *Model) bool { return m.bulk == nil && m.flashErr })
	want := "cancel sent to 2 tasks; 1 failed, the first (task " + ids[1] + "): refused by the test"
	if h.m.flash != want {
		t.Fatalf("the report says %q, want %q", h.m.flash, want)
	}
	if e, _ := d.Get(t.Context(), ids[1]); e.Task.Status != model.StatusWorking {
		t.Fatalf("the refused task is %s, want it working still", e.Task.Status)
	}
}

// TestCancelQuestionMakesOnlyTheLinesShown: asking to cancel every
// marked task names the first few and counts the rest, and makes a line
// only for those it shows (a line for each of 250,000 marked tasks took
// a second); its answer still acts on every one.
func TestCancelQuestionMakesOnlyTheLinesShown(t *testing.T) {
	m := loaded(t, benchTasks(2000), 120, 40)
	m.Update(tea.KeyPressMsg{Code: '1', Text: "1"}) // the open group: 500 tasks
	m.Update(tea.KeyPressMsg{Code: 'a', Mod: tea.ModCtrl})
	m.Update(tea.KeyPressMsg{Code: 'c', Text: "c"})
	if m.question == nil {
		t.Fatalf("no question:\n%s", screenOf(m))
	}
	const open = 500
	if s := screenOf(m); !strings.Contains(s, fmt.Sprintf("Cancel %d tasks on the server?", open)) ||
		!strings.Contains(s, fmt.Sprintf("… and %d more", open-maxTargets)) {
		t.Fatalf("the question:\n%s", s)
	}
	if len(m.question.targets) != maxTargets || len(m.question.reply(1).ids) != open {
		t.Fatalf("the question made %d lines and acts on %d tasks; want %d and %d",
			len(m.question.targets), len(m.question.reply(1).ids), maxTargets, open)
	}
}
