package service

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/engine"
	"github.com/taskdeck/taskdeck/internal/waitfor"
	"github.com/taskdeck/taskdeck/model"
)

// lastingOwner is what taskdeck serve does: it asks the transient owner to
// hand over, opens the engine once the store is free, serves it as a
// lasting owner and removes its mark. Before it opens, release lets the
// server answer the calls in flight.
func lastingOwner(t *testing.T, dir, mcpURL string, release func()) *engine.Engine {
	t.Helper()
	ctx := t.Context()
	d, err := Dial(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	done, err := AskHandOver(ctx, dir, d)
	d.Close()
	if err != nil {
		t.Fatalf("asking the owner to hand over: %v", err)
	}
	defer done()
	// The owner stops serving at once; its call in flight holds the
	// store until the server answers, which it does after a second of
	// trying to open the store (a busier machine only makes this test
	// weaker, never fail wrongly).
	sock, _ := SocketPath(dir)
	waitFor(t, "the owner to stop serving", 10*time.Second, func() bool { _, err := os.Lstat(sock); return os.IsNotExist(err) })
	var e *engine.Engine
	open := func() bool {
		e, err = openEngine(t, dir, mcpURL)
		if err != nil && deck.KindOf(err) != deck.KindLocked {
			t.Fatal(err)
		}
		return err == nil
	}
	if waitfor.Until(time.Second, 10*time.Millisecond, open) {
		e.Close()
		t.Fatal("the owner let the store go while its call was in flight")
	}
	release()
	waitFor(t, "the store to be handed over", 20*time.Second, open)
	srv, err := Serve(ctx, dir, e, nil, AsLasting())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		srv.Shutdown(context.Background())
		e.Close()
	})
	return e
}

// A transient owner asked to hand over finishes a call in flight, its
// own or its client's, mid tools/call (the server holds the answer, and
// releases it only once it sees the store still held): the call gets its
// task's handle, the server made one task and was hung up on never. Then the owner works through the new one,
// and its feed goes on from its last revision: nothing missed, nothing
// twice. The new owner, lasting, refuses to hand over.
func TestHandOverFinishesCallsInFlight(t *testing.T) {
	for _, through := range []string{"in process", "socket"} {
		t.Run(through, func(t *testing.T) { handOverMidCall(t, through == "socket") })
	}
}

func handOverMidCall(t *testing.T, throughSocket bool) {
	ctx := t.Context()
	dir, mcp := t.TempDir(), startDemo(t)
	gate := mcp.HoldAnswer("tools/call")
	t.Cleanup(gate.Release)
	handed := make(chan int, 1)
	a, err := Open(ctx, Options{DataDir: dir, Own: own(t, dir, mcp.URL), HandedOver: func(pid int) { handed <- pid }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	if !a.Owner() {
		t.Fatal("the first Open did not own the store")
	}
	b := open(t, dir, own(t, dir, mcp.URL))

	feed, err := a.Watch(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[string]model.Status{}
	var rev uint64
	var twice []uint64
	go func() {
		for ev := range feed.Events() {
			mu.Lock()
			if ev.Kind == deck.EventChange && ev.Rev <= rev {
				twice = append(twice, ev.Rev)
			}
			if ev.Kind == deck.EventChange || ev.Kind == deck.EventSnapshot {
				rev = ev.Rev
			}
			for _, e := range ev.Entries {
				seen[e.Task.ID] = e.Task.Status
			}
			mu.Unlock()
		}
	}()

	type outcome struct {
		res deck.CallResult
		err error
	}
	calls := make(chan outcome, 1)
	caller := a
	if throughSocket {
		caller = b
	}
	go func() {
		res, err := caller.Call(ctx, sleepCall(""))
		calls <- outcome{res, err}
	}()
	waitFor(t, "the server to create the task", 10*time.Second, func() bool { return mcp.Demo.Stats().TasksCreated == 1 })

	e := lastingOwner(t, dir, mcp.URL, gate.Release)
	if o := <-calls; o.err != nil || o.res.Task == nil || o.res.Task.TaskID == "" {
		t.Fatalf("a call in flight across the handover: %+v, %v", o.res.Task, o.err)
	}
	if n := mcp.Demo.Stats().TasksCreated; n != 1 {
		t.Fatalf("the server created %d tasks, want 1", n)
	}
	if n := gate.Abandoned(); n != 0 {
		t.Fatalf("the owner hung up on the server's answer %d times", n)
	}
	select {
	case pid := <-handed:
		if pid != os.Getpid() {
			t.Fatalf("handed over to pid %d, want %d", pid, os.Getpid())
		}
	case <-time.After(waitfor.Scale(10 * time.Second)):
		t.Fatal("HandedOver was not told")
	}
	if a.Owner() {
		t.Fatal("the old owner still owns the store")
	}

	// Made by the new owner, seen on the old owner's feed.
	res, err := e.Call(ctx, deck.CallRequest{Server: demoRef, Tool: "echo", Args: json.RawMessage(`{"text":"after"}`)})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the old owner's feed to show the new owner's change", 10*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return seen[res.Task.ID] == model.StatusCompleted
	})
	mu.Lock()
	if len(twice) > 0 || len(seen) != 2 {
		t.Fatalf("the feed across the handover: changes seen twice at %v; %d records, want 2", twice, len(seen))
	}
	mu.Unlock()
	if list, err := a.List(ctx, deck.Filter{}); err != nil || len(list) != 2 {
		t.Fatalf("List through the new owner: %d records, %v", len(list), err)
	}

	// The lasting owner keeps the store.
	d, err := Dial(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := AskHandOver(ctx, dir, d); deck.KindOf(err) != deck.KindState {
		t.Fatalf("a lasting owner asked to hand over: %v, want a refusal", err)
	}
	if _, err := os.Lstat(filepath.Join(dir, markName)); !os.IsNotExist(err) {
		t.Fatalf("the take-over mark outlived the take-over: %v", err)
	}
}
