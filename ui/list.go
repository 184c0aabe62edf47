package ui

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/internal/search"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/present"
	"github.com/taskdeck/taskdeck/termtext"
)

// row is one task as the table shows it, with its server text already
// sanitized (once, when it arrives, not on every frame). Rows are never
// changed in place: an update makes a new row, so the old one can still
// be found where the sort order put it.
type row struct {
	task                     *model.Task
	server, tool, msg, agent string
	text                     search.Text // what the filter searches
	statusRank, isErrRnk     int
	status                   model.Status // the task's, here so a filter pass reads only rows
	waits                    bool         // input_required with questions not yet answered
	waitingSince             time.Time    // when it began to wait for the operator (the inbox's clock)
	// groups has bit i set when deck.Groups[i] holds the row by its status
	// alone (failing polls are the list's to know): a group key reads
	// the group's own rows, not every row.
	groups uint8
	// keys are the row's values of memoFields, as the list numbers them.
	keys [len(memoFields)]int32
}

// newRow makes a task's row; server is its server's name as shown.
func newRow(t *model.Task, server string) *row {
	r := &row{
		task:   t,
		server: server,
		tool:   termtext.Line(t.Tool),
		msg:    termtext.Line(t.StatusMessage),
		agent:  termtext.Line(t.Agent),
	}
	r.status, r.waits = t.Status, t.WaitsForInput()
	if r.waits {
		r.waitingSince = t.WaitingSince()
	}
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
	for i, g := range deck.Groups {
		if g.Holds(r.status, r.waits, false) {
			r.groups |= 1 << i
		}
	}
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
	// byGroup[i] are the rows of all that deck.Groups[i] holds by status
	// (row.groups), in the order the group shows them.
	byGroup [][]*row
	order   int
	query   search.Query // the filter's search
	// memo decides the search's terms on each of memoFields once per
	// value (vals numbers the values); rest are its other terms.
	memo [len(memoFields)]fieldMemo
	vals [len(memoFields)]values
	rest search.Query
	// shown is what the visible rows were last filtered by, beside the
	// search: a narrower search may look among them only if it holds.
	shown  shownBy
	status model.Status // status filter; "" for all
	group  *deck.Group  // group view (groups.go); nil for all
	server string       // server view: a server's shown name; "" for all
	agent  string       // agent view: an agent's name as shown; "" for all
	// failing are the open tasks whose last poll failed (the problems group).
	failing map[string]bool
	// names shows a server's name (servers.go); nil: as recorded.
	names func(model.ServerRef) string
	// ends are the ids reversed and sorted: the short ids (ids.go).
	ends   []string
	counts map[model.Status]int
	// extra are the finished tasks per status the store holds and the
	// list does not (window.go): the counts shown are counts plus extra.
	extra   map[model.Status]int
	servers map[string]int // tasks per shown server name
	open    map[string]int // working and waiting tasks per shown server name
	waiting int            // rows that wait for input
	// waitingOn are the rows that wait for input per shown server name,
	// agents the rows per agent (the palette offers them).
	waitingOn, agents map[string]int
	// reorders counts the sorts and the single-row moves: what a batch
	// of changes cost (the tests count it).
	reorders int
}

func newTaskList() *taskList {
	return &taskList{byID: map[string]*row{}, byGroup: make([][]*row, len(deck.Groups)), counts: map[model.Status]int{}, extra: map[model.Status]int{}, servers: map[string]int{}, open: map[string]int{}, failing: map[string]bool{},
		waitingOn: map[string]int{}, agents: map[string]int{}}
}

func (l *taskList) cmp(a, b *row) int { return sortOrders[l.order].cmp(a, b) }

// visCmp orders the visible rows: as every row, but in the inbox by how
// long each has waited (only its rows are sorted so).
func (l *taskList) visCmp(a, b *row) int {
	if l.group != nil && l.group.Waiting {
		return inboxOrder(a, b)
	}
	return l.cmp(a, b)
}

func (l *taskList) newRow(t *model.Task) *row {
	var r *row
	if l.names != nil {
		r = newRow(t, l.names(t.Server))
	} else {
		r = newRow(t, termtext.Line(t.Server.String()))
	}
	for i, f := range memoFields {
		r.keys[i] = l.vals[i].key(r.text.Field(f))
	}
	return r
}

type shownBy struct {
	group         *deck.Group
	server, agent string
	status        model.Status
}

func (l *taskList) shownNow() shownBy { return shownBy{l.group, l.server, l.agent, l.status} }

// memoFields are the fields of few values: a search decides its terms on
// them once per value, not once per row.
var memoFields = [...]string{"tool", "server", "status"}

// statusMemo is the status field's place in memoFields.
const statusMemo = 2

// values numbers the values a field takes.
type values struct {
	keys map[string]int32
	all  []string
}

func (v *values) key(s string) int32 {
	k, ok := v.keys[s]
	if !ok {
		if v.keys == nil {
			v.keys = map[string]int32{}
		}
		k = int32(len(v.all))
		v.keys[s], v.all = k, append(v.all, s)
	}
	return k
}

// fieldMemo is what the search's terms on one field say of each value.
type fieldMemo struct {
	q    search.Query
	said []int8 // per value key: 0 not yet asked, 1 holds, -1 does not
}

func (f *fieldMemo) holds(k int32, vals *values) bool {
	for int(k) >= len(f.said) {
		f.said = append(f.said, 0)
	}
	if f.said[k] == 0 {
		f.said[k] = -1
		if f.q.MatchValue(vals.all[k]) {
			f.said[k] = 1
		}
	}
	return f.said[k] == 1
}

func (l *taskList) matches(r *row) bool {
	if l.status != "" && r.task.Status != l.status {
		return false
	}
	if l.group != nil && !l.inGroup(r) {
		return false
	}
	if l.server != "" && r.server != l.server {
		return false
	}
	if l.agent != "" && r.agent != l.agent {
		return false
	}
	for i := range l.memo {
		if len(l.memo[i].q) > 0 && !l.memo[i].holds(r.keys[i], &l.vals[i]) {
			return false
		}
	}
	return l.rest.Match(&r.text)
}

// admits reports whether the view shows a task, held or not.
func (l *taskList) admits(t *model.Task) bool { return l.matches(l.newRow(t)) }

// Replace loads a whole set of tasks.
func (l *taskList) Replace(tasks []*model.Task) {
	l.byID = make(map[string]*row, len(tasks))
	l.all = make([]*row, 0, len(tasks))
	l.visible = l.visible[:0]
	for i := range l.byGroup {
		l.byGroup[i] = l.byGroup[i][:0]
	}
	clear(l.counts)
	clear(l.servers)
	clear(l.open)
	clear(l.waitingOn)
	clear(l.agents)
	l.waiting = 0
	l.ends = l.ends[:0]
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
			delete(l.failing, id)
		}
	}
	for _, t := range tasks {
		if old, ok := l.byID[t.ID]; ok {
			stale[old] = true
			l.count(old, -1)
		} else {
			l.ends = append(l.ends, reversed(t.ID))
		}
		r := l.newRow(t)
		l.byID[t.ID] = r
		l.count(r, 1)
		l.all = append(l.all, r)
	}
	if len(stale) > 0 {
		l.all = slices.DeleteFunc(l.all, func(r *row) bool { return stale[r] })
	}
	if len(deleted) > 0 {
		l.ends = slices.DeleteFunc(l.ends, func(e string) bool { _, ok := l.byID[reversed(e)]; return !ok })
	}
	slices.Sort(l.ends)
	l.ends = slices.Compact(l.ends)
	l.resort()
}

// Upsert adds or updates one task.
func (l *taskList) Upsert(t *model.Task) {
	l.reorders++
	if old, ok := l.byID[t.ID]; ok {
		l.drop(old)
	} else {
		l.ends = insertEnd(l.ends, t.ID)
	}
	r := l.newRow(t)
	l.byID[t.ID] = r
	l.count(r, 1)
	l.all = insertSorted(l.all, r, l.cmp)
	for i := range l.byGroup {
		if r.groups&(1<<i) != 0 {
			l.byGroup[i] = insertSorted(l.byGroup[i], r, l.groupCmp(i))
		}
	}
	if l.matches(r) {
		l.visible = insertSorted(l.visible, r, l.visCmp)
	}
}

// Remove deletes a task.
func (l *taskList) Remove(id string) {
	if old, ok := l.byID[id]; ok {
		l.reorders++
		l.drop(old)
		delete(l.byID, id)
		delete(l.failing, id)
		l.ends = removeEnd(l.ends, id)
	}
}

func (l *taskList) count(r *row, d int) {
	l.counts[r.task.Status] += d
	l.servers[r.server] += d
	if r.task.Pollable() {
		l.open[r.server] += d
	}
	if r.waits {
		l.waiting += d
		l.waitingOn[r.server] += d
	}
	if r.agent != "" {
		l.agents[r.agent] += d
	}
}

func (l *taskList) drop(r *row) {
	l.count(r, -1)
	l.all = removeSorted(l.all, r, l.cmp)
	for i := range l.byGroup {
		if r.groups&(1<<i) != 0 {
			l.byGroup[i] = removeSorted(l.byGroup[i], r, l.groupCmp(i))
		}
	}
	l.visible = removeSorted(l.visible, r, l.visCmp)
}

// groupCmp is the order deck.Groups[i] shows its rows in: the inbox by
// how long each waited, the others as every row.
func (l *taskList) groupCmp(i int) func(a, b *row) int {
	if deck.Groups[i].Waiting {
		return inboxOrder
	}
	return l.cmp
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
	i, found := slices.BinarySearchFunc(l.visible, r, l.visCmp)
	if !found {
		return -1
	}
	return i
}

// SetFilter changes the filter text and status. A search that narrows
// the last (a letter typed at its end) looks only among the rows shown.
func (l *taskList) SetFilter(text string, status model.Status) {
	q := search.Parse(text)
	narrows := q.Narrows(l.query)
	l.query, l.status = q, status
	narrows = narrows && l.shown == l.shownNow()
	l.rest = q
	for i, f := range memoFields {
		l.memo[i].q, l.rest = l.rest.Split(f)
		l.memo[i].said = l.memo[i].said[:0]
	}
	if narrows {
		l.visible = slices.DeleteFunc(l.visible, func(r *row) bool { return !l.matches(r) })
		return
	}
	l.refilter()
}

// CycleOrder moves to the next sort order.
func (l *taskList) CycleOrder() {
	l.order = (l.order + 1) % len(sortOrders)
	l.resort()
}

func (l *taskList) OrderName() string {
	if l.group != nil && l.group.Waiting {
		return "waited longest"
	}
	return sortOrders[l.order].name
}

func (l *taskList) resort() {
	l.reorders++
	slices.SortFunc(l.all, l.cmp)
	for i := range l.byGroup {
		l.byGroup[i] = l.byGroup[i][:0]
		for _, r := range l.all {
			if r.groups&(1<<i) != 0 {
				l.byGroup[i] = append(l.byGroup[i], r)
			}
		}
		if deck.Groups[i].Waiting {
			slices.SortFunc(l.byGroup[i], inboxOrder)
		}
	}
	l.refilter()
}

// refilter makes the visible rows again from the rows that can pass: a
// group's own rows (with those its failing polls admit), else every row.
// A group and no other filter is a copy of the group's rows.
func (l *taskList) refilter() {
	l.shown = l.shownNow()
	from := l.all
	if l.group != nil {
		i := slices.IndexFunc(deck.Groups, func(g deck.Group) bool { return g.Name == l.group.Name })
		from = l.withFailing(l.byGroup[i], l.groupCmp(i))
	}
	if l.status == "" && l.server == "" && l.agent == "" && len(l.query) == 0 {
		l.visible = append(l.visible[:0], from...)
		return
	}
	l.visible = l.visible[:0]
	for _, r := range from {
		if l.matches(r) {
			l.visible = append(l.visible, r)
		}
	}
}

// withFailing adds to a group's rows, in its order, those whose failing
// polls it admits (the problems group).
func (l *taskList) withFailing(rows []*row, order func(a, b *row) int) []*row {
	if !l.group.PollsFailing || len(l.failing) == 0 {
		return rows
	}
	var extra []*row
	for id := range l.failing {
		if r, ok := l.byID[id]; ok && l.pollFails(r) && !l.group.Holds(r.status, r.waits, false) {
			extra = append(extra, r)
		}
	}
	if len(extra) == 0 {
		return rows
	}
	slices.SortFunc(extra, order)
	merged := make([]*row, 0, len(rows)+len(extra))
	for len(rows) > 0 && len(extra) > 0 {
		if order(rows[0], extra[0]) <= 0 {
			merged, rows = append(merged, rows[0]), rows[1:]
		} else {
			merged, extra = append(merged, extra[0]), extra[1:]
		}
	}
	return append(append(merged, rows...), extra...)
}

// hasAgents reports whether a record held names an agent: the table
// then has an AGENT column.
func (l *taskList) hasAgents() bool {
	for _, n := range l.agents {
		if n > 0 {
			return true
		}
	}
	return false
}

// Len is the number of tasks, filtered or not.
func (l *taskList) Len() int { return len(l.all) }

// stored is how many tasks of a status the store holds.
func (l *taskList) stored(st model.Status) int { return l.counts[st] + l.extra[st] }

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
