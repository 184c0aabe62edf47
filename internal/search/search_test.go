package search

import (
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/model"
)

// A search narrows another when what it matches is always among what the
// other matches: a letter typed at the end, a term added, a shorter -
// word; not a letter taken away, a field changed, or a longer - word.
func TestNarrows(t *testing.T) {
	for _, c := range []struct {
		q, prev string
		want    bool
	}{
		{"tool:sle", "tool:sl", true},
		{"tool:sleep status:work", "tool:sleep", true},
		{"sleep", "", true},
		{"-fai", "-fail", true},
		{"tool:sl", "tool:sle", false},
		{"tool:sleep", "tool:sleep status:work", false},
		{"server:sleep", "tool:sleep", false},
		{"-fail", "-fai", false},
		{"-sleep", "sleep", false},
	} {
		if got := Parse(c.q).Narrows(Parse(c.prev)); got != c.want {
			t.Errorf("%q narrows %q: %v, want %v", c.q, c.prev, got, c.want)
		}
	}
}

// Deciding the terms on a field by its value alone, with the rest matched
// as before, gives what Match gives.
func TestSplitMatchesAsAWhole(t *testing.T) {
	task := model.NewIntent(model.ServerRef{Name: "web"}, "Sleep", []byte(`{"seconds":5}`), "", time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	task.Status = model.StatusWorking
	x := Of(task, "slept 1 of 5 s")
	for _, s := range []string{"tool:sle", "tool:sle seconds:5", "tool:sle -seconds:5", "-tool:sle", "tool:x seconds:5", "status:work tool:sleep web", ""} {
		q := Parse(s)
		tool, rest := q.Split("tool")
		if got, want := tool.MatchValue(x.Field("tool")) && rest.Match(&x), q.Match(&x); got != want {
			t.Errorf("%q: split %v, whole %v", s, got, want)
		}
	}
}
