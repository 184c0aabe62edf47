package engine

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/internal/hostile"
	"github.com/taskdeck/taskdeck/internal/waitfor"
	"github.com/taskdeck/taskdeck/mcpclient"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store/badger"
)

// headerEnv is a tracker on a hostile front over the demo server, so a
// test sees every request with its headers.
type headerEnv struct {
	t       *testing.T
	srv     *hostile.Server
	tracker *tracker
	ref     model.ServerRef
}

func newHeaderEnv(t *testing.T) *headerEnv {
	t.Helper()
	srv := hostile.Start(t, demo.Options{Speed: 0.05, PollInterval: 20 * time.Millisecond})
	st, err := badger.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	pool := mcpclient.NewPool(mcpclient.PoolOptions{})
	t.Cleanup(func() {
		pool.Close()
		st.Close()
	})
	return &headerEnv{t: t, srv: srv, ref: model.ServerRef{URL: srv.URL},
		tracker: newTracker(st, pool, trackerOptions{Policy: trackerPolicy, RequestTimeout: waitfor.Scale(5 * time.Second)})}
}

// deploy calls the demo's header tool and checks that a task was made and
// that the last tools/call carried the region as its header.
func (e *headerEnv) deploy(region string) {
	e.t.Helper()
	args, _ := json.Marshal(map[string]any{"region": region})
	rec, _, err := tupled(e.tracker.Call(context.Background(), callRequest{Server: e.ref, Tool: demo.HeaderTool, Args: args}))
	if err != nil {
		e.t.Fatalf("deploy %s: %v", region, err)
	}
	if rec.TaskID == "" {
		e.t.Fatalf("deploy %s made no task: %+v", region, rec)
	}
	calls := e.srv.Requests("tools/call")
	if got := calls[len(calls)-1].Header.Get("Mcp-Param-Region"); got != region {
		e.t.Fatalf("tools/call carried Mcp-Param-Region %q, want %q", got, region)
	}
}

// TestToolListKeptAndRefreshedWhenStale: a tracker lists a server's tools
// once (for the call's check and its headers) and mirrors x-mcp-header
// arguments into Mcp-Param-* headers on every call; the list is listed
// again once its ttlMs has run out. The first list's life outlasts one
// call (check, then send) on a busy machine.
func TestToolListKeptAndRefreshedWhenStale(t *testing.T) {
	e := newHeaderEnv(t)
	var mu sync.Mutex
	short := waitfor.Scale(time.Second)
	ttlMs := int(short.Milliseconds())
	e.srv.On("tools/list", e.srv.Rewrite(hostile.Tree(func(res map[string]any) {
		mu.Lock()
		defer mu.Unlock()
		res["ttlMs"] = ttlMs
	})))
	lists := func() int { return len(e.srv.Requests("tools/list")) }

	e.deploy("eu-west-1")
	// The tracker received the list before deploy returned: it is stale
	// for certain once its ttl has run from here.
	firstDone := time.Now()
	if n := lists(); n != 1 {
		t.Fatalf("tools listed %d times before the first call, want once", n)
	}
	mu.Lock()
	ttlMs = 60_000
	mu.Unlock()
	waitUntil(t, "the first list to go stale", func() bool {
		return time.Since(firstDone) > short+5*time.Millisecond
	})
	// The first list is stale: listed again before the call.
	e.deploy("eu-west-2")
	if n := lists(); n != 2 {
		t.Fatalf("a stale list was used: %d lists, want 2", n)
	}
	// That list holds for 60 s: kept.
	e.deploy("eu-west-3")
	if n := lists(); n != 2 {
		t.Fatalf("a fresh list was listed again: %d lists, want 2", n)
	}
}

// TestToolListRefreshedOnHeaderRefusal: when the server refuses a call
// for its headers (-32020) because the tool changed since it was listed,
// the list is refreshed and the call sent once more, with the headers.
func TestToolListRefreshedOnHeaderRefusal(t *testing.T) {
	e := newHeaderEnv(t)
	var mu sync.Mutex
	first := true
	e.srv.On("tools/list", e.srv.Rewrite(hostile.Tree(func(res map[string]any) {
		mu.Lock()
		defer mu.Unlock()
		if !first {
			return
		}
		first = false
		// The tool as it was before it gained its annotations.
		for _, tl := range res["tools"].([]any) {
			if tool := tl.(map[string]any); tool["name"] == demo.HeaderTool {
				for _, p := range tool["inputSchema"].(map[string]any)["properties"].(map[string]any) {
					delete(p.(map[string]any), "x-mcp-header")
				}
			}
		}
	})))
	// A first call lists the tools, deploy as it was then.
	if _, _, err := tupled(e.tracker.Call(context.Background(), callRequest{Server: e.ref, Tool: "echo", Args: json.RawMessage(`{"text":"x"}`)})); err != nil {
		t.Fatal(err)
	}
	e.deploy("eu-west-1")
	if lists, calls := len(e.srv.Requests("tools/list")), len(e.srv.Requests("tools/call")); lists != 2 || calls != 3 {
		t.Fatalf("%d tools/list and %d tools/call; want echo, the refused deploy, one refresh and deploy again", lists, calls)
	}
	if created := e.srv.Demo.Stats().TasksCreated; created != 1 {
		t.Fatalf("%d tasks created, want 1", created)
	}
}
