package engine

import (
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/demo"
	mcpconfig "github.com/taskdeck/taskdeck/mcpclient/config"
	"github.com/taskdeck/taskdeck/model"
)

// An owner with "retention": {"finished": "1m"} prunes the finished
// tasks not changed for a minute, by its clock, and keeps the younger
// ones and the open ones; Servers reports the schedule, who runs it, and
// its last run. An engine without Options.Retention prunes nothing and
// says that nothing running prunes.
func TestRetentionPrunesFinishedTasks(t *testing.T) {
	srv := startDemo(t, demo.Options{})
	cfg, err := mcpconfig.ParseConfig("test.json", fmt.Appendf(nil, `{"mcpServers":{"demo":{"url":%q}},"retention":{"finished":"1m"}}`, srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	var skew atomic.Int64
	now := func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	e := open(t, t.TempDir(), srv, Options{Config: cfg, Retention: true, Now: now, retentionEvery: 20 * time.Millisecond})
	ctx := ctxT(t)
	call := func(tool, args string) *model.Task {
		t.Helper()
		res, err := e.Call(ctx, deck.CallRequest{Server: model.ServerRef{Name: "demo"}, Tool: tool, Args: json.RawMessage(args)})
		if err != nil {
			t.Fatal(err)
		}
		return res.Task
	}
	old := call("echo", `{"text":"old"}`)
	running := call("sleep", `{"seconds":600}`)
	if err := e.PollNow(ctx, nil); err != nil { // the owner's loop, and the schedule with it
		t.Fatal(err)
	}
	skew.Store(int64(2 * time.Minute))
	young := call("echo", `{"text":"young"}`)
	// The run is reported once its prune has committed: wait for both.
	waitFor(t, 10*time.Second, "the old finished task pruned and the run reported", func() bool {
		_, err := e.Get(ctx, old.ID)
		servers, serr := e.Servers(ctx)
		return deck.KindOf(err) == deck.KindNotFound && serr == nil && len(servers) == 1 &&
			servers[0].Retention != nil && !servers[0].Retention.LastRun.IsZero()
	})
	for _, id := range []string{running.ID, young.ID} {
		if _, err := e.Get(ctx, id); err != nil {
			t.Fatalf("task %s was pruned: %v", id, err)
		}
	}
	servers, err := e.Servers(ctx)
	if err != nil || len(servers) != 1 || servers[0].Retention == nil {
		t.Fatalf("Servers = %+v, %v; want the retention", servers, err)
	}
	if r := servers[0].Retention; r.Finished != "1m0s" || r.Runner != "this engine" || r.LastRun.IsZero() || r.LastError != "" {
		t.Fatalf("retention = %+v", r)
	}

	quiet := open(t, t.TempDir(), srv, Options{Config: cfg})
	servers, err = quiet.Servers(ctx)
	if err != nil || servers[0].Retention == nil || servers[0].Retention.Runner != "" || !servers[0].Retention.LastRun.IsZero() {
		t.Fatalf("an engine that does not run the schedule reports %+v, %v", servers[0].Retention, err)
	}
}
