package search

import (
	"strings"
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

// agent: and key: look in the agent's name and the idempotency key; a
// search that matches nothing because of a word shaped like a field term
// whose field does not exist says so, naming the nearest field; one that
// matches (seconds:5 in the arguments) or names a field does not.
func TestAgentKeyAndUnknownFields(t *testing.T) {
	task := model.NewIntent(model.ServerRef{Name: "web"}, "deploy", []byte(`{"seconds":5}`), "nightly-42", time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	task.Agent = "CI-Bot"
	x := Of(task, "")
	for s, want := range map[string]bool{"agent:ci-bot": true, "agent:other": false, "key:nightly": true, "-key:nightly": false, "ci-bot": true, "seconds:5": true} {
		if got := Parse(s).Match(&x); got != want {
			t.Errorf("%q matches: %v, want %v", s, got, want)
		}
	}
	for s, want := range map[string]string{
		"agnet:ci":   `"agnet" is not a search field, and no task holds it as a word; did you mean agent:?`,
		"colour:red": `"colour" is not a search field`,
		"agent:x":    "",
		"seconds:9":  `"seconds" is not a search field`,
		"-colour:x":  "",
		"a1:x":       "",
	} {
		err := Parse(s).Unmatched()
		if (err == nil) != (want == "") || err != nil && !strings.Contains(err.Error(), want) {
			t.Errorf("%q: Unmatched = %v, want %q", s, err, want)
		}
	}
}
