package ui

import (
	"strings"
	"testing"

	"github.com/taskdeck/taskdeck/deck"
)

// While the database is lost the header's first line says so, since
// when, that polling is paused, and why (on one line, whatever the cause
// holds), at 80 and 200 columns, and the table keeps its place; once it
// is back the line goes and the status line says so.
func TestHeaderSaysTheDatabaseIsLost(t *testing.T) {
	for _, w := range []int{80, 200} {
		m := loaded(t, sampleTasks(), w, 24)
		before := strings.Split(screenOf(m), "\n")
		since := fixedNow.Add(-90e9)
		m.Update(feedMsg{events: []deck.Event{{Kind: deck.EventStore, Store: &deck.Store{
			Since: since, Error: "PostgreSQL store: listen for changes: dial tcp 127.0.0.1:5432: connect: connection refused\n\x1b[2Jspoof"}}}})
		lines := strings.Split(screenOf(m), "\n")
		want := "database unreachable since " + since.Local().Format("15:04:05") + " — polling paused, retrying"
		if !strings.Contains(lines[0], want) {
			t.Errorf("%d columns: header while lost %q, want it to say %q", w, lines[0], want)
		}
		if w == 200 && !strings.Contains(lines[0], "connection refused spoof") {
			t.Errorf("%d columns: header %q does not give the cause on one line", w, lines[0])
		}
		if len(lines) != len(before) || strings.TrimRight(lines[2], " ") != strings.TrimRight(before[2], " ") {
			t.Errorf("%d columns: the table moved while the database was lost: %d lines, was %d; %q, was %q", w, len(lines), len(before), lines[2], before[2])
		}
		m.Update(feedMsg{events: []deck.Event{{Kind: deck.EventStore, Store: &deck.Store{Up: true, Since: fixedNow}}}})
		if l := strings.Split(screenOf(m), "\n")[0]; strings.Contains(l, "database") {
			t.Errorf("%d columns: header once the database is back %q", w, l)
		}
		if m.told() != "the database is back; polling resumes" {
			t.Errorf("%d columns: status line %q once the database is back", w, m.told())
		}
	}
}
