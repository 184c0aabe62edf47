package ui

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/taskdeck/taskdeck/internal/search"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/termtext"
	"github.com/taskdeck/taskdeck/ui/present"
)

// row is one task as the table shows it, with its server text already
// sanitized (once, when it arrives, not on every frame). Rows are never
// changed in place: an update makes a new row, so the old one can still
// be found where the sort order put it.
type row struct {
	task                 *model.Task
	server, tool, msg    string
	text                 search.Text // what the filter searches
	statusRank, isErrRnk int
	waits                bool // input_required with questions not yet answered
}

func newRow(t *model.Task) *row {
	r := &row{
		task:   t,
		server: termtext.Line(t.Server.String()),
		tool:   termtext.Line(t.Tool),
		msg:    termtext.Line(t.StatusMessage),
	}
	r.waits = t.WaitsForInput()
	switch {
	case t.Error != nil: // a failed task: its error says more than its last progress
		r.msg = termtext.Line(fmt.Sprintf("error %d: %s", t.Error.Code, t.Error.Message))
	case t.Status == model.StatusCompleted && t.IsError:
		if res := termtext.Line(present.Result(t)); res != "" {
			r.msg = res
		}
	case r.msg == "" && r.waits:
		if inputs := present.Inputs(t); len(inputs) > 0 {
			r.msg = "asks: " + inputs[0].Message
		}
	}
	r.statusRank = slices.Index(model.AllStatuses, t.Status)
	if t.IsError {
		r.isErrRnk = 1
	}
	r.text = search.Of(t, r.msg)
	return r
}

// sortOrder is one way of ordering the table.
type sortOrder struct {
	name string
	cmp  func(a, b *row) int
}

// sortOrders are the orders `o` cycles through. Every order ends on the
// id, so it is total and a row can be found by binary search.
var sortOrders = []sortOrder{
	{"newest", func(a, b *row) int { return cmp.Compare(b.task.ID, a.task.ID) }},
	{"status", func(a, b *row) int {
		return cmp.Or(cmp.Compare(a.statusRank, b.statusRank), cmp.Compare(a.isErrRnk, b.isErrRnk), cmp.Compare(b.task.ID, a.task.ID))
	}},
	{"last change", func(a, b *row) int {
		return cmp.Or(b.task.UpdatedAt.Compare(a.task.UpdatedAt), cmp.Compare(b.task.ID, a.task.ID))
	}},
	{"server", func(a, b *row) int {
		return cmp.Or(cmp.Compare(a.server, b.server), cmp.Compare(a.tool, b.tool), cmp.Compare(b.task.ID, a.task.ID))
	}},
	{"oldest", func(a, b *row) int { return cmp.Compare(a.task.ID, b.task.ID) }},
}

// taskList holds every task and the sorted, filtered view of them. An
// update costs a binary search and a move, not a re-sort: it must stay
// cheap at 100,000 tasks.
type taskList struct {
	byID    map[string]*row
	all     []*row // sorted by order
	visible []*row // the rows of all that pass the filter, same order
	order   int
	query   search.Query // the filter's search
	status  model.Status // status filter; "" for all
	counts  map[model.Status]int
	waiting int // rows that wait for input
	// reorders counts the sorts and the single-row moves: what a batch
	// of changes cost (the tests count it).
	reorders int
}

func newTaskList() *taskList {
	return &taskList{byID: map[string]*row{}, counts: map[model.Status]int{}}
}

func (l *taskList) cmp(a, b *row) int { return sortOrders[l.order].cmp(a, b) }

func (l *taskList) matches(r *row) bool {
	if l.status != "" && r.task.Status != l.status {
		return false
	}
	return l.query.Match(&r.text)
}

// Replace loads a whole set of tasks.
func (l *taskList) Replace(tasks []*model.Task) {
	l.byID = make(map[string]*row, len(tasks))
	l.all = make([]*row, 0, len(tasks))
	clear(l.counts)
	l.waiting = 0
	l.Apply(tasks, nil)
}

// fewChanges is the largest batch Apply puts in row by row: a binary
// search and a move each. A larger one costs one sort.
const fewChanges = 16

// Apply puts a batch of changes in: new versions of tasks (one each) and
// the ids deleted.
func (l *taskList) Apply(tasks []*model.Task, deleted []string) {
	if len(tasks)+len(deleted) <= fewChanges {
		for _, id := range deleted {
			l.Remove(id)
		}
		for _, t := range tasks {
			l.Upsert(t)
		}
		return
	}
	stale := map[*row]bool{}
	for _, id := range deleted {
		if old, ok := l.byID[id]; ok {
			stale[old] = true
			l.count(old, -1)
			delete(l.byID, id)
		}
	}
	for _, t := range tasks {
		if old, ok := l.byID[t.ID]; ok {
			stale[old] = true
			l.count(old, -1)
		}
		r := newRow(t)
		l.byID[t.ID] = r
		l.count(r, 1)
		l.all = append(l.all, r)
	}
	if len(stale) > 0 {
		l.all = slices.DeleteFunc(l.all, func(r *row) bool { return stale[r] })
	}
	l.resort()
}

// Upsert adds or updates one task.
func (l *taskList) Upsert(t *model.Task) {
	l.reorders++
	if old, ok := l.byID[t.ID]; ok {
		l.drop(old)
	}
	r := newRow(t)
	l.byID[t.ID] = r
	l.count(r, 1)
	l.all = insertSorted(l.all, r, l.cmp)
	if l.matches(r) {
		l.visible = insertSorted(l.visible, r, l.cmp)
	}
}

// Remove deletes a task.
func (l *taskList) Remove(id string) {
	if old, ok := l.byID[id]; ok {
		l.reorders++
		l.drop(old)
		delete(l.byID, id)
	}
}

func (l *taskList) count(r *row, d int) {
	l.counts[r.task.Status] += d
	if r.waits {
		l.waiting += d
	}
}

func (l *taskList) drop(r *row) {
	l.count(r, -1)
	l.all = removeSorted(l.all, r, l.cmp)
	l.visible = removeSorted(l.visible, r, l.cmp)
}

// Get returns a task by id.
func (l *taskList) Get(id string) (*model.Task, bool) {
	r, ok := l.byID[id]
	if !ok {
		return nil, false
	}
	return r.task, true
}

// IndexOf finds a task in the visible rows, or -1.
func (l *taskList) IndexOf(id string) int {
	r, ok := l.byID[id]
	if !ok {
		return -1
	}
	i, found := slices.BinarySearchFunc(l.visible, r, l.cmp)
	if !found {
		return -1
	}
	return i
}

// SetFilter changes the filter text and status.
func (l *taskList) SetFilter(text string, status model.Status) {
	l.query, l.status = search.Parse(text), status
	l.refilter()
}

// CycleOrder moves to the next sort order.
func (l *taskList) CycleOrder() {
	l.order = (l.order + 1) % len(sortOrders)
	l.resort()
}

func (l *taskList) OrderName() string { return sortOrders[l.order].name }

func (l *taskList) resort() {
	l.reorders++
	slices.SortFunc(l.all, l.cmp)
	l.refilter()
}

func (l *taskList) refilter() {
	l.visible = l.visible[:0]
	for _, r := range l.all {
		if l.matches(r) {
			l.visible = append(l.visible, r)
		}
	}
}

// Len is the number of tasks, filtered or not.
func (l *taskList) Len() int { return len(l.all) }

func insertSorted(rows []*row, r *row, cmp func(a, b *row) int) []*row {
	i, _ := slices.BinarySearchFunc(rows, r, cmp)
	return slices.Insert(rows, i, r)
}

func removeSorted(rows []*row, r *row, cmp func(a, b *row) int) []*row {
	i, found := slices.BinarySearchFunc(rows, r, cmp)
	if !found || rows[i] != r {
		return rows
	}
	return slices.Delete(rows, i, i+1)
}
