package notify_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/internal/waitfor"
	mcpconfig "github.com/taskdeck/taskdeck/mcpclient/config"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/notify"
	"github.com/taskdeck/taskdeck/store"
	"github.com/taskdeck/taskdeck/store/badger"
)

// hookStore is a real Badger store committing the events of cfg's
// "notify", and a Deliverer sending them, closed at cleanup.
func hookStore(t testing.TB, cfg string) (*badger.Store, mcpconfig.Notify, *notify.Deliverer) {
	t.Helper()
	c, err := mcpconfig.ParseConfig("c.json", []byte(cfg))
	if err != nil {
		t.Fatal(err)
	}
	s, err := badger.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	s.SetEvents(notify.Events(c.Notify))
	d, err := notify.New(s, notify.Options{Notify: c.Notify, FirstRetry: 20 * time.Millisecond, MaxRetry: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	d.Start()
	t.Cleanup(func() {
		d.Close()
		s.Close()
	})
	s.SetCommitHook(func([]store.Change) { d.Wake() })
	return s, c.Notify, d
}

// fail makes a task on server demo, tool tool, and moves it to failed.
func fail(t *testing.T, s *badger.Store, tool string) *model.Task {
	t.Helper()
	rec := model.NewIntent(model.ServerRef{Name: "demo"}, tool, json.RawMessage(`{}`), "", time.Now())
	if err := s.Create(rec); err != nil {
		t.Fatal(err)
	}
	got, err := s.Update(rec.ID, func(x *model.Task) (bool, error) {
		x.LocalError = "the server said no"
		return true, x.MoveTo(model.StatusFailed, "", time.Now())
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func script(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "hook.sh")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o700); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCommandHookGetsTheEventOnStdin: a real script, run without a shell
// (its argument with a space and a $ arrives as one, unexpanded), reads
// the event's JSON on stdin and its id in $TASKDECK_EVENT_ID.
func TestCommandHookGetsTheEventOnStdin(t *testing.T) {
	out := filepath.Join(t.TempDir(), "got")
	hook := script(t, `printf '%s\n' "$1" > "$2.arg"; printf '%s\n' "$TASKDECK_EVENT_ID" > "$2.id"; cat > "$2.tmp" && mv "$2.tmp" "$2"`)
	s, n, _ := hookStore(t, fmt.Sprintf(`{"notify":{"commands":[{"argv":[%q,"a $HOME b",%q],"events":["failed"]}]}}`, hook, out))
	task := fail(t, s, "build")
	waitfor.Within(t, 10*time.Second, "the hook to write the event", func() bool { _, err := os.Stat(out); return err == nil })
	var p notify.Payload
	b, _ := os.ReadFile(out)
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	if p.Type != "task.failed" || p.Data.Task.ID != task.ID || p.Data.Task.Tool != "build" || p.Data.Task.Error != "the server said no" || p.Data.Show != "taskdeck get "+task.ID {
		t.Errorf("payload %+v", p)
	}
	arg, _ := os.ReadFile(out + ".arg")
	id, _ := os.ReadFile(out + ".id")
	if string(arg) != "a $HOME b\n" || !strings.HasPrefix(string(id), "msg_") {
		t.Errorf("argument %q, event id %q", arg, id)
	}
	waitfor.Within(t, 10*time.Second, "the delivery to be counted", func() bool {
		st, err := s.OutboxStats()
		return err == nil && st[n.Commands[0].Endpoint()].Delivered == 1 && st[n.Commands[0].Endpoint()].Pending == 0
	})
}

// TestCommandHookFailures: a hook that exits non-zero, one that hangs past
// its timeout (killed, with the child it started), and one that floods
// stdout are each a failed delivery with a one-line error, retried with
// the event kept; the flood is bounded in what is kept.
func TestCommandHookFailures(t *testing.T) {
	for _, tc := range []struct{ name, body, timeout, want string }{
		{"exit", "echo 'no webhook today' >&2; exit 3", "5s", "exit status 3: no webhook today"},
		{"hang", "sleep 600 & sleep 600", "300ms", "killed after 300ms"},
		{"flood", "head -c 5000000 /dev/zero | tr '\\0' x; exit 1", "20s", "exit status 1: xxxx"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hook := script(t, tc.body)
			s, n, _ := hookStore(t, fmt.Sprintf(`{"notify":{"commands":[{"argv":[%q],"events":["failed"],"timeout":%q}]}}`, hook, tc.timeout))
			fail(t, s, "build")
			ep := n.Commands[0].Endpoint()
			var st store.EndpointStats
			waitfor.Within(t, 30*time.Second, "a failed attempt", func() bool {
				all, err := s.OutboxStats()
				st = all[ep]
				return err == nil && st.Failing
			})
			if !strings.Contains(st.LastError, tc.want) || strings.Contains(st.LastError, "\n") || len(st.LastError) > 400 || st.Pending != 1 || st.Delivered != 0 {
				t.Errorf("stats %+v, want one line with %q and the event pending", st, tc.want)
			}
		})
	}
}

// TestCommandHookThatLeavesAChildRunsOnce: a hook that does its work,
// exits 0 and leaves a child holding its stdout (a script that starts a
// sound player or a notifier in the background) has delivered: it runs
// once, and the event is counted delivered, not failed and run again a
// second later (the same payload twice at nearly the same moment).
func TestCommandHookThatLeavesAChildRunsOnce(t *testing.T) {
	out := filepath.Join(t.TempDir(), "ids")
	hook := script(t, `cat >/dev/null; printf '%s\n' "$TASKDECK_EVENT_ID" >> "$1"; sleep 30 &`)
	s, n, _ := hookStore(t, fmt.Sprintf(`{"notify":{"commands":[{"argv":[%q,%q],"events":["failed"]}]}}`, hook, out))
	fail(t, s, "build")
	ep := n.Commands[0].Endpoint()
	var st store.EndpointStats
	waitfor.Within(t, 30*time.Second, "the delivery's outcome", func() bool {
		all, err := s.OutboxStats()
		st = all[ep]
		return err == nil && (st.Delivered > 0 || st.Failing)
	})
	ids, _ := os.ReadFile(out)
	if st.Delivered != 1 || st.Failing || st.Pending != 0 || strings.Count(string(ids), "\n") != 1 {
		t.Errorf("stats %+v, hook ran with ids %q; want one run, delivered", st, ids)
	}
}
