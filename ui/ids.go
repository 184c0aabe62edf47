package ui

import (
	"slices"
)

// minShortID is the shortest id the ID column shows: four characters of
// base32 tell a million ids apart, so short ids rarely grow as tasks come.
const minShortID = 4

// shortID is the shortest end of an id that no other task's id ends
// with (at least minShortID): ids of one minute share their first ten
// characters, their ends differ. `taskdeck get` takes it.
func (l *taskList) shortID(id string) string {
	e := reversed(id)
	i, _ := slices.BinarySearch(l.ends, e)
	n := minShortID
	for _, j := range []int{i - 1, i + 1} { // its neighbours share the longest ends
		if j >= 0 && j < len(l.ends) {
			n = max(n, commonPrefix(e, l.ends[j])+1)
		}
	}
	return id[max(len(id)-n, 0):]
}

func commonPrefix(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// reversed is an id back to front (ids are ASCII).
func reversed(id string) string {
	b := []byte(id)
	slices.Reverse(b)
	return string(b)
}

func insertEnd(ends []string, id string) []string {
	e := reversed(id)
	i, found := slices.BinarySearch(ends, e)
	if found {
		return ends
	}
	return slices.Insert(ends, i, e)
}

func removeEnd(ends []string, id string) []string {
	i, found := slices.BinarySearch(ends, reversed(id))
	if !found {
		return ends
	}
	return slices.Delete(ends, i, i+1)
}

// idWidth is the ID column's width: the longest short id on screen.
func (m *Model) idWidth() int {
	w := minShortID
	end := min(m.top+m.tableHeight(), len(m.list.visible))
	for _, r := range m.list.visible[m.top:end] {
		w = max(w, len(m.list.shortID(r.task.ID)))
	}
	return w
}
