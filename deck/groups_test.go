package deck

import (
	"strings"
	"testing"

	"github.com/taskdeck/taskdeck/model"
)

func TestParseStatusesTakesGroupsAndLists(t *testing.T) {
	st, gs, err := ParseStatuses("failed, open,waiting")
	if err != nil || len(st) != 1 || st[0] != model.StatusFailed || len(gs) != 2 || gs[0].Name != "open" || gs[1].Name != "waiting" {
		t.Fatalf("ParseStatuses = %v %v %v", st, gs, err)
	}
	_, _, err = ParseStatuses("open,stuck")
	if err == nil || !strings.Contains(err.Error(), `"stuck"`) || !strings.Contains(err.Error(), "problems") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("an unknown name: %v", err)
	}
}

// A filter admits by status or group, server (name or URL), tool, key and
// text (in the arguments, the status message or the result, any case).
func TestFilterAdmits(t *testing.T) {
	asks := &model.Task{Status: model.StatusInputRequired, Server: model.ServerRef{Name: "build"}, Tool: "deploy",
		InputRequests: map[string]model.InputRequest{"ok": {Method: "elicitation/create"}}, Arguments: []byte(`{"env":"Prod"}`)}
	answered := &model.Task{Status: model.StatusInputRequired, Server: model.ServerRef{URL: "http://127.0.0.1:1/mcp"}, Tool: "deploy",
		InputRequests: map[string]model.InputRequest{"ok": {}}, AnsweredKeys: []string{"ok"}, IdempotencyKey: "k1"}
	working := &model.Task{Status: model.StatusWorking, Tool: "sleep", StatusMessage: "Step 2"}
	for _, c := range []struct {
		f    Filter
		e    Entry
		want bool
	}{
		{Filter{}, Entry{Task: working}, true},
		{Filter{Groups: []string{"waiting"}}, Entry{Task: asks}, true},
		{Filter{Groups: []string{"waiting"}}, Entry{Task: answered}, false},
		{Filter{Groups: []string{"problems"}}, Entry{Task: working, Poll: PollState{Errors: 1}}, true},
		{Filter{Groups: []string{"problems"}}, Entry{Task: working}, false},
		{Filter{Statuses: []model.Status{model.StatusWorking}, Groups: []string{"waiting"}}, Entry{Task: working}, true},
		{Filter{Groups: []string{"stuck"}}, Entry{Task: working}, false},
		{Filter{Server: "build"}, Entry{Task: asks}, true},
		{Filter{Server: "http://127.0.0.1:1/mcp"}, Entry{Task: answered}, true},
		{Filter{Server: "build"}, Entry{Task: answered}, false},
		{Filter{Tool: "deploy"}, Entry{Task: working}, false},
		{Filter{Key: "k1"}, Entry{Task: answered}, true},
		{Filter{Key: "k1"}, Entry{Task: asks}, false},
		{Filter{Text: "prod"}, Entry{Task: asks}, true},
		{Filter{Text: "step 2"}, Entry{Task: working}, true},
		{Filter{Text: "prod"}, Entry{Task: working}, false},
	} {
		if got := c.f.Admits(c.e); got != c.want {
			t.Errorf("%+v admits %s %s: %v, want %v", c.f, c.e.Task.Status, c.e.Task.Tool, got, c.want)
		}
	}
}
