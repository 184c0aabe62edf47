package ui

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/taskdeck/taskdeck/deck/decktest"
	"github.com/taskdeck/taskdeck/model"
)

// searchTasks are four tasks on two servers with arguments and results.
func searchTasks() []*model.Task {
	mk := func(id, server, tool string, st model.Status, args, result string) *model.Task {
		t := model.NewIntent(model.ServerRef{Name: server}, tool, json.RawMessage(args), "", fixedNow)
		t.ID, t.Status, t.TaskID = id, st, "remote-"+id
		if result != "" {
			t.Result = json.RawMessage(result)
		}
		return t
	}
	return []*model.Task{
		mk("s1", "web", "sleep", model.StatusWorking, `{"seconds":5}`, ""),
		mk("s2", "build", "sleep", model.StatusFailed, `{"seconds":600}`, ""),
		mk("s3", "web", "echo", model.StatusCompleted, `{"text":"hi"}`, `{"content":[{"type":"text","text":"hello world"}]}`),
		mk("s4", "web", "deploy", model.StatusFailed, `{"env":"prod"}`, ""),
	}
}

func shownIDs(m *Model) []string {
	var ids []string
	for _, r := range m.list.visible {
		ids = append(ids, r.task.ID)
	}
	slices.Sort(ids)
	return ids
}

// The filter searches arguments and results, and field terms look in
// one field; -term excludes.
func TestSearchByFieldsArgumentsAndResults(t *testing.T) {
	m := loaded(t, searchTasks(), 120, 30)
	for _, c := range []struct {
		query string
		want  []string
	}{
		{"tool:sleep", []string{"s1", "s2"}},
		{"server:web status:failed", []string{"s4"}},
		{"seconds:5", []string{"s1"}}, // not a field: a plain word, found in {"seconds":5}
		{"seconds:", []string{"s1", "s2"}},
		{"args:seconds:600", []string{"s2"}},
		{"hello", []string{"s3"}},
		{"result:hello", []string{"s3"}},
		{"-tool:sleep", []string{"s3", "s4"}},
		{"prod -status:working", []string{"s4"}},
		{"TOOL:Echo", []string{"s3"}},
		{"nope:sleep", nil}, // not a field: a plain word no row holds
	} {
		m.filter.SetValue(c.query)
		m.applyFilter()
		if got := shownIDs(m); !slices.Equal(got, c.want) {
			t.Errorf("%q shows %v, want %v", c.query, got, c.want)
		}
	}
}

// Searches kept with enter come back with ↑ and ↓, in a later run too,
// from a file only its owner reads.
func TestSearchHistoryIsKeptAcrossRuns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "search-history")
	m := loadedOn(t, decktest.New(nil), searchTasks(), 120, 30, Options{SearchHistory: path})
	for _, q := range []string{"tool:sleep", "status:failed", "tool:sleep"} {
		press(m, "/")
		m.filter.SetValue(q)
		press(m, "enter")
		press(m, "esc") // clears the filter
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("history file mode %v, want 0600", fi.Mode().Perm())
	}

	m = loadedOn(t, decktest.New(nil), searchTasks(), 120, 30, Options{SearchHistory: path})
	press(m, "/")
	var got []string
	for _, k := range []string{"up", "up", "up", "down", "down"} {
		press(m, k)
		got = append(got, m.filter.Value())
	}
	want := []string{"tool:sleep", "status:failed", "status:failed", "tool:sleep", ""}
	if !slices.Equal(got, want) {
		t.Fatalf("↑↑↑↓↓ gave %q, want %q", got, want)
	}
	press(m, "up")
	if ids := shownIDs(m); !slices.Equal(ids, []string{"s1", "s2"}) {
		t.Fatalf("the search from the history shows %v", ids)
	}
}

// A search typed letter by letter looks among the rows shown (it only
// narrows), yet always shows what a pass over every row finds: with rows
// changing between the letters, a letter taken back, a group key and a
// status filter between them, and a - word typed (which widens).
func TestSearchAsTypedShowsWhatAPassFinds(t *testing.T) {
	tasks := benchTasks(400)
	m := loaded(t, tasks, 120, 30)
	check := func(step string) {
		t.Helper()
		if !sameAsAPass(m.list) {
			t.Fatalf("%s (search %q): %d rows shown, a pass over every row finds %d", step, m.filter.Value(), len(m.list.visible), len(rowsByAPass(m.list)))
		}
	}
	poll := func(i int, st model.Status) {
		c := tasks[i].Clone()
		c.Status, c.InputRequests = st, nil
		c.StatusMessage = "moved on"
		m.list.Apply([]*model.Task{c}, nil)
	}
	press(m, "/")
	for i, k := range []string{"t", "o", "o", "l", ":", "t", "o", "o", "l", "-", "1"} {
		press(m, k)
		check("typed " + k)
		poll(i*13+1, model.StatusWorking) // a tool-1 row among them in turn
		check("a row changed")
	}
	press(m, "backspace")
	check("a letter taken back")
	for _, k := range []string{" ", "-", "s", "t", "e", "p"} {
		press(m, k)
		check("typed " + k)
	}
	press(m, "backspace") // -ste: shows more than -step did
	check("a - word made shorter")
	press(m, "enter")
	press(m, "3")
	check("the finished group")
	press(m, "/")
	press(m, "x")
	check("a letter in the group")
	press(m, "enter")
	press(m, "s")
	check("a status filter")
	press(m, "/")
	press(m, "backspace")
	check("a letter taken back under the status filter")
	press(m, "enter")
	press(m, "2")
	check("the inbox")
	press(m, "esc") // every task again, no search
	check("esc")
	press(m, "2")
	press(m, "esc") // the same empty search, the group gone
	check("esc with no search")
}
