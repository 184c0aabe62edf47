package e2e

import (
	"strings"
	"testing"

	"github.com/taskdeck/taskdeck/internal/clitest"
)

// `taskdeck rerun` calls a failed task's tool again with its arguments:
// a new record that names the old one (--json "repeats"); a task still
// working is refused with one line that says what to do.
func TestRerunCommand(t *testing.T) {
	t.Parallel()
	d, srv := tuiDeck(t)
	failed := d.call("fail", `{"mode":"error"}`)
	d.run("watch").Must(t, 0)
	r := d.run("rerun", failed, "--json").Must(t, 0)
	again := parseTask(t, strings.TrimSpace(r.Stdout))
	if again.ID == failed || again.Tool != "fail" || string(again.raw["repeats"]) != `"`+failed+`"` || string(again.raw["arguments"]) != `{"mode":"error"}` {
		t.Fatalf("rerun --json: %s", r.Stdout)
	}
	if n := srv.stats(t).ToolCalls["fail"]; n != 2 {
		t.Fatalf("the server got %d calls of fail, want 2", n)
	}
	if got := d.getJSON(failed); got.Status != "failed" || got.raw["repeats"] != nil {
		t.Fatalf("the old record changed: %+v", got)
	}

	sleep := d.call("sleep", `{"seconds":3000}`)
	refused := d.run("rerun", sleep[:10]).Must(t, exitUsage)
	clitest.OneErrorLine(t, refused, "task "+sleep+" is working: only failed, cancelled, unknown or orphaned tasks are re-run")
}
