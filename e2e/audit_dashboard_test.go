package e2e

import (
	"encoding/json"
	"fmt"
	"os/user"
	"strings"
	"testing"

	"github.com/taskdeck/taskdeck/model"
)

// TestAuditNamesTheDashboardsOperator: at the real dashboard (tmux), the
// operator answers an approve through its form and cancels a sleep; the
// two calls made before at the command line and these two acts are in
// `taskdeck audit --json`, in that order, each naming the local user
// (role user), the answer with its input key; `audit verify` passes.
func TestAuditNamesTheDashboardsOperator(t *testing.T) {
	t.Parallel()
	d, srv := tuiDeck(t)
	approveID := d.call("approve", `{"action":"deploy"}`)
	sleepID := d.call("sleep", `{"seconds":3000}`)

	tm := d.dashboard(100, 30)
	tm.waitScreen("the approve waiting for input, the sleep working", func(s string) bool {
		return oneRow(s, "approve") == "input_required" && oneRow(s, "sleep") == "working"
	})
	tm.selectRow("approve")
	tm.keys("a")
	tm.waitText("Approve deploy?", "Reason *")
	tm.keys("y")
	tm.waitText("┃ Reason *")
	tm.typeText("the operator at the dashboard")
	tm.waitText("> the operator at the dashboard")
	tm.keys("Enter")
	tm.waitText("answered: task " + approveID)
	tm.waitScreen("the approve row completed", func(s string) bool { return oneRow(s, "approve") == "completed" })
	tm.selectRow("sleep")
	tm.keys("c")
	tm.waitText("Cancel 1 task on the server?", sleepID)
	tm.keys("y")
	tm.waitScreen("the sleep row cancelled", func(s string) bool { return oneRow(s, "sleep") == "cancelled" })
	tm.quit()
	if st := srv.stats(t); st.Updates != 1 || st.Cancels != 1 {
		t.Fatalf("the server saw %d tasks/update and %d tasks/cancel, want 1 and 1", st.Updates, st.Cancels)
	}

	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	type act struct{ kind, task, name, role, keys string }
	want := []act{
		{model.ActCall, approveID, me.Username, model.RoleUser, ""},
		{model.ActCall, sleepID, me.Username, model.RoleUser, ""},
		{model.ActAnswer, approveID, me.Username, model.RoleUser, "approve-1"},
		{model.ActCancel, sleepID, me.Username, model.RoleUser, ""},
	}
	var got []act
	var last uint64
	for line := range strings.Lines(d.run("audit", "--json").Must(t, exitOK).Stdout) {
		var e model.AuditEntry
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("audit --json printed %q: %v", line, err)
		}
		if e.Rev <= last {
			t.Fatalf("entry %d after %d: %s", e.Rev, last, line)
		}
		last = e.Rev
		if e.Actor.Role != model.RoleEngine {
			got = append(got, act{e.Act, e.Task, e.Actor.Name, e.Actor.Role, strings.Join(e.Keys, ",")})
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("the acts in the audit log, in order:\n%v\nwant:\n%v", got, want)
	}
	if out := d.run("audit", "verify").Must(t, exitOK).Stdout; !strings.Contains(out, "each sealed with the audit key") {
		t.Fatalf("audit verify: %s", out)
	}
}
