package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/taskdeck/taskdeck/internal/clitest"
)

// TestServeLogsItsLife: `taskdeck serve` logs at info level (no -v) its
// start, the end of its reconcile with the counts, and its stop.
func TestServeLogsItsLife(t *testing.T) {
	t.Parallel()
	d, _ := tuiDeck(t)
	d.call("sleep", `{"seconds":600}`)
	owner := d.serve()
	logPath := filepath.Join(d.dataDir, "taskdeck.log")
	read := func() string {
		b, _ := os.ReadFile(logPath)
		return string(b)
	}
	clitest.WaitFor(t, "the reconcile's line", func() bool { return strings.Contains(read(), "reconcile: every open task checked") })
	if err := owner.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-owner.done
	log := read()
	for _, want := range []string{"level=INFO msg=\"serve: started\"", "tasks=1 reattached=1", "level=INFO msg=\"serve: stopping\"", "level=INFO msg=\"serve: stopped\""} {
		if !strings.Contains(log, want) {
			t.Errorf("the log lacks %q:\n%s", want, log)
		}
	}
}
