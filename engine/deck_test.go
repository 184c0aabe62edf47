package engine

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/model"
)

func TestCancelShowsInTheFeedWithinASecond(t *testing.T) {
	srv := startDemo(t, demo.Options{PollInterval: time.Hour})
	e := open(t, t.TempDir(), srv, Options{})
	ctx := ctxT(t)
	f, err := e.Watch(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	ids := launch(t, e, 1)
	start := time.Now()
	rec, err := e.Cancel(ctx, ids[0])
	if err != nil {
		t.Fatal(err)
	}
	if rec.Status != model.StatusCancelled {
		t.Fatalf("Cancel returned %s, want cancelled (it polls once at once)", rec.Status)
	}
	next(t, f, time.Second, "the task cancelled in the feed", func(ev deck.Event) bool {
		return about(ids[0])(ev) && ev.Entries[0].Task.Status == model.StatusCancelled
	})
	t.Logf("cancel in the feed after %v", time.Since(start))
	if n := len(srv.Requests("tasks/cancel")); n != 1 {
		t.Fatalf("%d tasks/cancel, want 1", n)
	}
}

func TestListFiltersNewestFirst(t *testing.T) {
	srv := startDemo(t, demo.Options{})
	e := open(t, t.TempDir(), srv, Options{})
	ctx := ctxT(t)
	var ids []string
	for _, text := range []string{"apple", "banana", "cherry"} {
		res, err := e.Call(ctx, deck.CallRequest{Server: demoRef, Tool: "echo", Args: json.RawMessage(`{"text":"` + text + `"}`)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.Task.ID)
	}
	sleep := launch(t, e, 1)[0]

	all, err := e.List(ctx, deck.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 4 || all[0].Task.ID != sleep || all[3].Task.ID != ids[0] {
		t.Fatalf("List = %v, want newest first", taskIDs(all))
	}
	cases := []struct {
		name string
		f    deck.Filter
		want []string
	}{
		{"status", deck.Filter{Statuses: []model.Status{model.StatusWorking}}, []string{sleep}},
		{"tool", deck.Filter{Tool: "echo"}, []string{ids[2], ids[1], ids[0]}},
		{"text in arguments", deck.Filter{Text: "BANANA"}, []string{ids[1]}},
		{"text in the result", deck.Filter{Text: "cherry", Tool: "echo"}, []string{ids[2]}},
		{"server by name", deck.Filter{Server: "demo", Limit: 2}, []string{sleep, ids[2]}},
		{"server by another name", deck.Filter{Server: "other"}, nil},
		{"limit", deck.Filter{Limit: 1}, []string{sleep}},
	}
	for _, c := range cases {
		got, err := e.List(ctx, c.f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(taskIDs(got), ",") != strings.Join(c.want, ",") {
			t.Errorf("%s: %v, want %v", c.name, taskIDs(got), c.want)
		}
	}
}

func taskIDs(es []deck.Entry) []string {
	var ids []string
	for _, e := range es {
		ids = append(ids, e.Task.ID)
	}
	return ids
}

func TestServersAndTools(t *testing.T) {
	srv := startDemo(t, demo.Options{})
	e := open(t, t.TempDir(), srv, Options{})
	ctx := ctxT(t)
	servers, err := e.Servers(ctx)
	if err != nil || len(servers) != 1 || servers[0].Name != "demo" || servers[0].Target != srv.URL || servers[0].Stdio {
		t.Fatalf("Servers = %+v, %v", servers, err)
	}
	list, err := e.Tools(ctx, demoRef, false)
	if err != nil {
		t.Fatal(err)
	}
	if !list.SupportsTasks || list.Server != "demo" {
		t.Fatalf("Tools = %+v", list)
	}
	var pipeline *deck.Tool
	for i, tool := range list.Tools {
		if tool.Name == "pipeline" {
			pipeline = &list.Tools[i]
		}
	}
	if pipeline == nil || len(pipeline.Raw) == 0 || len(pipeline.InputSchema) == 0 {
		t.Fatalf("pipeline tool %+v, want it with its raw form and schema", pipeline)
	}
	if len(pipeline.Arguments) != 1 || pipeline.Arguments[0].Summary != "integer, optional, default 3, 1 to 20" {
		t.Fatalf("pipeline arguments %+v", pipeline.Arguments)
	}
	before := len(srv.Requests("tools/list"))
	if _, err := e.Tools(ctx, demoRef, true); err != nil {
		t.Fatal(err)
	}
	if after := len(srv.Requests("tools/list")); after != before+1 {
		t.Fatalf("refresh sent %d tools/list, want 1", after-before)
	}
}
