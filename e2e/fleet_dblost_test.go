package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/internal/hostile"
	"github.com/taskdeck/taskdeck/internal/pgtest"
	"github.com/taskdeck/taskdeck/internal/waitfor"
)

// These tests stop the package's PostgreSQL: none of them, and no test
// on PostgreSQL, may be parallel.

// dbDeck is a deck on a fresh PostgreSQL database, with the demo server.
func dbDeck(t *testing.T) *deck {
	t.Helper()
	db := pgtest.DB(t)
	srv := hostile.Start(t, demo.Options{Speed: 1, PollInterval: 200 * time.Millisecond, NoPush: true})
	d := newDeck(t)
	d.writeConfig(fmt.Sprintf(`{"store":%q,"mcpServers":{"demo":{"url":%q}}}`, db, srv.URL))
	return d
}

// TestDBLostWatchAndCall: `taskdeck serve` owns a deck on PostgreSQL and
// `taskdeck watch` follows its tasks through it. The database stops: watch
// prints a line that says so, and a call exits 3 with one line that says
// nothing was recorded (and nothing was). It starts again: watch prints
// that it is back and follows the tasks to their end.
func TestDBLostWatchAndCall(t *testing.T) {
	d := dbDeck(t)
	serve := d.start("serve")
	fleetWait(t, 20*time.Second, "serve to start", func() bool { return serve.exited() || len(serve.Stderr.String()) > 0 })
	if serve.exited() {
		t.Fatalf("serve exited %d: %s", serve.Code, serve.Stderr)
	}
	var ids []string
	for range 3 {
		ids = append(ids, d.call("sleep", `{"seconds":8}`))
	}
	watch := d.start("watch")
	fleetWait(t, 20*time.Second, "watch to reconcile", func() bool { return strings.Contains(watch.Stdout.String(), "reconciled:") })

	pgtest.Stop(t)
	fleetWait(t, 15*time.Second, "watch to say the database is unreachable", func() bool {
		return strings.Contains(watch.Stdout.String(), "database unreachable: ")
	})
	line := lineWith(watch.Stdout.String(), "database unreachable: ")
	if !strings.HasSuffix(line, "polling paused, retrying") {
		t.Errorf("watch's line: %q", line)
	}
	r := d.run("call", "--server", "demo", "echo", "--args", `{"text":"while the database is down"}`)
	if r.Code != exitUnreachable || strings.Count(strings.TrimSpace(r.Stderr), "\n") != 0 ||
		!strings.HasPrefix(r.Stderr, "taskdeck: the database is unreachable") || !strings.Contains(r.Stderr, "nothing was recorded") || r.Stdout != "" {
		t.Errorf("a call while the database is down: %s", r)
	}

	pgtest.Start(t)
	fleetWait(t, 20*time.Second, "watch to say the database is back", func() bool {
		return strings.Contains(watch.Stdout.String(), "database back; polling resumes")
	})
	select {
	case <-watch.done:
	case <-time.After(waitfor.Scale(30 * time.Second)):
		t.Fatalf("watch did not follow the tasks to their end after the database came back:\n%s", watch.Stdout)
	}
	if watch.Code != 0 {
		t.Errorf("watch exited %d: %s", watch.Code, watch.Stderr)
	}
	tasks := d.ls()
	if len(tasks) != len(ids) {
		t.Errorf("%d records after the outage, want the %d calls made before it (the refused call recorded nothing)", len(tasks), len(ids))
	}
	for _, tk := range tasks {
		if tk.Status != "completed" {
			t.Errorf("task %s: %s, want completed", tk.ID, tk.Status)
		}
	}
}

// lineWith is the first line of out that holds s, without its newline.
func lineWith(out, s string) string {
	for l := range strings.Lines(out) {
		if strings.Contains(l, s) {
			return strings.TrimRight(l, "\n")
		}
	}
	return ""
}

// TestDBLostDashboard: a dashboard on a PostgreSQL store, at 80×24 and
// 200×60, says in its header that the database is unreachable while it is
// stopped (at 200 columns with the cause), and the line goes once it is
// back, with the tasks still shown.
func TestDBLostDashboard(t *testing.T) {
	for _, size := range [][2]int{{80, 24}, {200, 60}} {
		t.Run(fmt.Sprintf("%dx%d", size[0], size[1]), func(t *testing.T) {
			d := dbDeck(t)
			d.call("sleep", `{"seconds":30}`)
			tm := d.dashboard(size[0], size[1])
			tm.waitText("sleep")
			pgtest.Stop(t)
			s := tm.waitScreenFor(waitfor.Scale(15*time.Second), "the header's word that the database is unreachable", func(s string) bool {
				return strings.Contains(strings.Split(s, "\n")[0], "database unreachable since")
			})
			head := strings.Split(s, "\n")[0]
			if !strings.Contains(head, "polling paused, retrying") || size[0] == 200 && !strings.Contains(head, "PostgreSQL store") {
				t.Errorf("header: %q", head)
			}
			t.Logf("the header while the database is down: %s", strings.TrimSpace(head))
			pgtest.Start(t)
			s = tm.waitScreenFor(waitfor.Scale(20*time.Second), "the header's line to go once the database is back", func(s string) bool {
				return !strings.Contains(s, "database unreachable")
			})
			if !strings.Contains(s, "sleep") {
				t.Errorf("the task is gone from the dashboard after the outage:\n%s", s)
			}
			tm.quit()
		})
	}
}
