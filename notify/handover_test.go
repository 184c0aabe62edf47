package notify_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/internal/waitfor"
	"github.com/taskdeck/taskdeck/notify"
	"github.com/taskdeck/taskdeck/store"
)

// TestHandoverRunsAHookOnce: a config reload hands delivery to a new
// Deliverer while a hook runs (it waits for a gate file). The running
// hook is neither cut off nor started again by the new one: the new
// Deliverer runs the hook for the next event (so it has read the outbox
// meanwhile), and once the gate opens each event was told once. Before
// Handover, the reload closed the old Deliverer, killing the hook, and
// the new one ran it again at once.
func TestHandoverRunsAHookOnce(t *testing.T) {
	dir := t.TempDir()
	runs, gate := filepath.Join(dir, "runs"), filepath.Join(dir, "gate")
	hook := script(t, `cat >/dev/null; printf '%s\n' "$TASKDECK_EVENT_ID" >> "$1"; while [ ! -e "$2" ]; do sleep 0.05; done`)
	s, n, d := hookStore(t, fmt.Sprintf(`{"notify":{"commands":[{"argv":[%q,%q,%q],"events":["failed"],"timeout":"60s"}]}}`, hook, runs, gate))
	lines := func() []string {
		b, _ := os.ReadFile(runs)
		return strings.Fields(string(b))
	}
	fail(t, s, "first")
	waitfor.Within(t, 30*time.Second, "the hook to start", func() bool { return len(lines()) == 1 })

	next, err := notify.New(s, notify.Options{Notify: n, FirstRetry: 20 * time.Millisecond, MaxRetry: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	d.Handover(next)
	next.Start()
	t.Cleanup(next.Close)
	s.SetCommitHook(func([]store.Change) { next.Wake() })

	fail(t, s, "second")
	waitfor.Within(t, 30*time.Second, "the new Deliverer to run the hook for the second event", func() bool {
		for _, id := range lines()[1:] {
			if id != lines()[0] {
				return true
			}
		}
		return false
	})
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ep := n.Commands[0].Endpoint()
	waitfor.Within(t, 30*time.Second, "both events delivered", func() bool {
		st, err := s.OutboxStats()
		return err == nil && st[ep].Delivered == 2 && st[ep].Pending == 0
	})
	got := lines()
	if len(got) != 2 || got[0] == got[1] {
		t.Fatalf("the hook ran for events %q; want each of the two once", got)
	}
}
