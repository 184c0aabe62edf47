package ui

import (
	"github.com/taskdeck/taskdeck/deck/decktest"
	"strings"
	"testing"
)

// A read-only dashboard: each key that changes records says why it does
// nothing, nothing changes, and the palette leaves those actions out.
func TestReadOnlyRefusesActionsAndSaysWhy(t *testing.T) {
	tasks := sampleTasks()
	m := loadedOn(t, decktest.New(nil), tasks, 100, 30, Options{ReadOnly: true})
	for k, verb := range map[string]string{"c": "cancel", "a": "answer", "n": "make a call", "R": "re-run", "D": "set a deadline"} {
		press(m, k)
		if m.mode() != modeTable || !strings.Contains(m.flash, "a viewer cannot "+verb) {
			t.Fatalf("%s on a read-only dashboard: mode %d, status %q; want it refused, saying why", k, m.mode(), m.flash)
		}
	}
	press(m, ":")
	for _, a := range m.palette.all {
		for _, c := range m.keys.changes() {
			if a.b.Help().Desc == c.b.Help().Desc {
				t.Fatalf("the read-only palette offers %q", a.b.Help().Desc)
			}
		}
	}
	if !strings.Contains(screenOf(m), "mark all") {
		t.Fatalf("the read-only palette lacks what a viewer may do:\n%s", screenOf(m))
	}
}
