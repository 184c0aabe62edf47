package engine

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/internal/hostile"
	"github.com/taskdeck/taskdeck/model"
)

// TestListByGroup: List takes the status groups, alone or with statuses,
// and "problems" admits open tasks whose polls fail.
func TestListByGroup(t *testing.T) {
	// No push: a pushed change would clear a task's failing polls before
	// the other task's had failed too, on a busy machine.
	srv := startDemo(t, demo.Options{NoPush: true})
	e := open(t, t.TempDir(), srv, Options{})
	ctx := ctxT(t)
	call := func(tool, args string) string {
		t.Helper()
		res, err := e.Call(ctx, deck.CallRequest{Server: demoRef, Tool: tool, Args: json.RawMessage(args)})
		if err != nil {
			t.Fatal(err)
		}
		return res.Task.ID
	}
	if err := e.PollNow(ctx, nil); err != nil { // the loop runs from the first PollNow
		t.Fatal(err)
	}
	echo := call("echo", `{"text":"hi"}`)
	sleep := call("sleep", `{"seconds":3600}`)
	ask := call("approve", `{"action":"deploy"}`)
	failed := call("fail", `{"mode":"error"}`)
	waitFor(t, 10*time.Second, "the approval waits and the failure ended", func() bool {
		a, _ := e.Get(ctx, ask)
		f, _ := e.Get(ctx, failed)
		return a.Task.WaitsForInput() && f.Task.Status == model.StatusFailed
	})
	list := func(f deck.Filter) string {
		t.Helper()
		got, err := e.List(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		ids := taskIDs(got)
		slices.Sort(ids)
		return strings.Join(ids, ",")
	}
	set := func(ids ...string) string { slices.Sort(ids); return strings.Join(ids, ",") }
	cases := []struct {
		f    deck.Filter
		want string
	}{
		{deck.Filter{Groups: []string{"open"}}, set(sleep, ask)},
		{deck.Filter{Groups: []string{"waiting"}}, set(ask)},
		{deck.Filter{Groups: []string{"finished"}}, set(echo, failed)},
		{deck.Filter{Groups: []string{"problems"}}, set(failed)},
		{deck.Filter{Groups: []string{"waiting"}, Statuses: []model.Status{model.StatusCompleted}}, set(ask, echo)},
	}
	for _, c := range cases {
		if got := list(c.f); got != c.want {
			t.Errorf("List(%+v) = %s, want %s", c.f, got, c.want)
		}
	}

	srv.On("tasks/get", hostile.HTTPStatus(500))
	if err := e.PollNow(ctx, nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the open tasks' polls fail", func() bool {
		return list(deck.Filter{Groups: []string{"problems"}}) == set(failed, sleep, ask)
	})

	_, err := e.List(context.Background(), deck.Filter{Groups: []string{"stuck"}})
	if de := kindIs(t, err, deck.KindUsage); !strings.Contains(de.Error(), "open, waiting, finished and problems") {
		t.Fatalf("an unknown group: %v", err)
	}
}
