package service

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/internal/waitfor"
	"github.com/taskdeck/taskdeck/model"
)

func open(t *testing.T, dir string, own func() (deck.Deck, error)) *Client {
	t.Helper()
	c, err := Open(t.Context(), Options{DataDir: dir, Own: own})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// Open becomes the owner where none is, connects where one is, and the
// other takes over within 1 s after the owner exits.
func TestOpenOwnsConnectsTakesOver(t *testing.T) {
	ctx := t.Context()
	dir, mcp := t.TempDir(), startDemo(t)
	a := open(t, dir, own(t, dir, mcp.URL))
	if !a.Owner() {
		t.Fatal("the first Open did not become the owner")
	}
	b := open(t, dir, own(t, dir, mcp.URL))
	if b.Owner() {
		t.Fatal("the second Open became an owner beside the first")
	}
	res, err := b.Call(ctx, sleepCall(""))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Get(ctx, res.Task.ID); err != nil {
		t.Fatalf("the call through the socket is not in the owner's store: %v", err)
	}

	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	got, err := b.Get(ctx, res.Task.ID)
	took := time.Since(start)
	if err != nil || got.Task.ID != res.Task.ID {
		t.Fatalf("Get after the owner exited: %+v, %v", got, err)
	}
	if !b.Owner() || took > waitfor.Scale(takeoverBound) {
		t.Fatalf("took over in %v (owner %v), want the owner within %v", took, b.Owner(), waitfor.Scale(takeoverBound))
	}
	t.Logf("took over in %v", took)
}

// A feed survives the owner's exit: it resumes from the last revision it
// delivered, so its watcher sees nothing twice (revisions only rise) and
// misses nothing (what it holds comes to be what the store holds).
func TestFeedResumesAcrossOwnerChange(t *testing.T) {
	ctx := t.Context()
	dir, mcp := t.TempDir(), startDemo(t)
	a := open(t, dir, own(t, dir, mcp.URL))
	w := open(t, dir, own(t, dir, mcp.URL))
	feed, err := w.Watch(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	// The watcher's view, kept as a dashboard keeps it.
	var mu sync.Mutex
	view := map[string]model.Status{}
	var rev uint64
	twice := make(chan string, 1)
	go func() {
		for ev := range feed.Events() {
			if ev.Kind != deck.EventSnapshot && ev.Kind != deck.EventChange {
				continue
			}
			mu.Lock()
			if ev.Kind == deck.EventChange && ev.Rev <= rev {
				select {
				case twice <- fmt.Sprintf("%s at rev %d after rev %d", ev.Kind, ev.Rev, rev):
				default:
				}
			}
			rev = ev.Rev
			if ev.Kind == deck.EventSnapshot {
				clear(view)
			}
			for _, e := range ev.Entries {
				view[e.Task.ID] = e.Task.Status
			}
			for _, id := range ev.Deleted {
				delete(view, id)
			}
			mu.Unlock()
		}
	}()
	// approve tasks wait for input once they start: the view settles.
	call := deck.CallRequest{Server: demoRef, Tool: "approve", Args: json.RawMessage(`{"action":"deploy"}`)}
	made := 0
	calls := make(chan struct{})
	go func() {
		defer close(calls)
		for range 200 {
			if _, err := a.Call(ctx, call); err != nil {
				return
			}
			mu.Lock()
			made++
			mu.Unlock()
		}
	}()
	waitFor(t, "calls before the exit", 5*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return made >= 20 })
	a.Close()
	<-calls
	// Through the next owner (the watcher's process or a third), more.
	c := open(t, dir, own(t, dir, mcp.URL))
	for range 20 {
		if _, err := c.Call(ctx, call); err != nil {
			t.Fatal(err)
		}
	}
	same := func() bool {
		list, err := c.List(ctx, deck.Filter{})
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(list) != len(view) {
			return false
		}
		for _, e := range list {
			if view[e.Task.ID] != e.Task.Status {
				return false
			}
		}
		return true
	}
	waitFor(t, "the watcher's view to be the store's", 5*time.Second, same)
	select {
	case s := <-twice:
		t.Fatalf("a change seen twice: %s", s)
	default:
	}
	t.Logf("%d records, the owner changed after %d; the watcher is at rev %d", len(view), made, rev)
}

// A changing request cut off by the owner's going fails with
// KindOwnerGone and is not sent again; a Call with a key is, and gets the
// record the first send committed.
func TestCutOffMidRequest(t *testing.T) {
	for _, key := range []string{"", "k"} {
		t.Run("key="+key, func(t *testing.T) {
			ctx := t.Context()
			dir, mcp := t.TempDir(), startDemo(t)
			a := open(t, dir, own(t, dir, mcp.URL))
			b := open(t, dir, own(t, dir, mcp.URL))
			held := mcp.Hold("tools/call")
			type out struct {
				res deck.CallResult
				err error
			}
			done := make(chan out, 1)
			go func() {
				res, err := b.Call(ctx, sleepCall(key))
				done <- out{res, err}
			}()
			waitFor(t, "the call at the server", 5*time.Second, func() bool { return mcp.Calls("sleep") == 1 })
			// The owner dies with the request in it: its connections go,
			// then it closes what it was doing and its store.
			a.srv.http.Close()
			held.Release()
			a.Close()
			o := <-done
			list, err := b.List(ctx, deck.Filter{})
			if err != nil || len(list) != 1 {
				t.Fatalf("%d records after the cut-off call (%v), want the one the owner committed", len(list), err)
			}
			if key == "" {
				de := wantKind(t, "a call cut off", o.err, deck.KindOwnerGone)
				if !strings.Contains(de.Message, "went away") || !strings.Contains(de.Message, "taskdeck ls") {
					t.Fatalf("the message does not say what happened and where to look: %q", de.Message)
				}
				return
			}
			if o.err != nil || !o.res.Reused || o.res.Task.ID != list[0].Task.ID {
				t.Fatalf("a keyed call cut off: %+v, %v; want it retried and the committed record reused", o.res, o.err)
			}
			if n := mcp.Calls("sleep"); n != 1 {
				t.Fatalf("%d tools/call for one keyed call, want 1", n)
			}
		})
	}
}

// A changing request that never reached an owner (the owner was killed
// before it) is sent to the next one, and that one is this process
// within 1 s of the kill.
func TestTakeoverAfterSIGKILL(t *testing.T) {
	ctx := t.Context()
	dir, mcp := t.TempDir(), startDemo(t)
	cmd := startChild(t, "TestOwnerProcess", "TASKDECK_SERVICE_OWNER_DIR="+dir, "TASKDECK_SERVICE_OWNER_MCP="+mcp.URL)
	b := open(t, dir, own(t, dir, mcp.URL))
	if b.Owner() {
		t.Fatal("Open became the owner beside a live one")
	}
	if _, err := b.Call(ctx, sleepCall("")); err != nil {
		t.Fatal(err)
	}
	syscall.Kill(cmd.Process.Pid, syscall.SIGKILL)
	cmd.Wait()
	start := time.Now()
	res, err := b.Call(ctx, sleepCall(""))
	took := time.Since(start)
	if err != nil {
		t.Fatalf("a call after the owner was killed: %v", err)
	}
	if !b.Owner() || took > waitfor.Scale(takeoverBound) {
		t.Fatalf("took over in %v (owner %v), want within %v", took, b.Owner(), waitfor.Scale(takeoverBound))
	}
	list, err := b.List(ctx, deck.Filter{})
	if err != nil || len(list) != 2 || (list[0].Task.ID != res.Task.ID && list[1].Task.ID != res.Task.ID) {
		t.Fatalf("after the takeover: %d records, %v; want both calls'", len(list), err)
	}
	t.Logf("took over in %v after SIGKILL", took)
}

// TestOwnerProcess is the owner TestTakeoverAfterSIGKILL kills.
func TestOwnerProcess(t *testing.T) {
	dir := os.Getenv("TASKDECK_SERVICE_OWNER_DIR")
	if dir == "" {
		t.Skip("the owner process of TestTakeoverAfterSIGKILL")
	}
	e, err := openEngine(t, dir, os.Getenv("TASKDECK_SERVICE_OWNER_MCP"))
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv("TASKDECK_SERVICE_OWNER_HOLD") == "" { // else it holds the store, serving nothing
		if _, err := Serve(context.Background(), dir, e, nil); err != nil {
			t.Fatal(err)
		}
	}
	fmt.Println("ready")
	select {}
}

// Open gives up with the store's own error when the store is held by a
// process that serves nothing, after stuckAfter, having said once that it
// waits.
func TestOpenLockedWithoutOwner(t *testing.T) {
	defer func(d time.Duration) { stuckAfter = d }(stuckAfter)
	stuckAfter = 2 * time.Second
	dir, mcp := t.TempDir(), startDemo(t)
	cmd := startChild(t, "TestOwnerProcess", "TASKDECK_SERVICE_OWNER_DIR="+dir, "TASKDECK_SERVICE_OWNER_MCP="+mcp.URL, "TASKDECK_SERVICE_OWNER_HOLD=1")
	start := time.Now()
	var said []string
	_, err := Open(t.Context(), Options{DataDir: dir, Own: own(t, dir, mcp.URL), Waiting: func(m string) { said = append(said, m) }})
	if deck.KindOf(err) != deck.KindLocked || !strings.Contains(err.Error(), fmt.Sprint(cmd.Process.Pid)) {
		t.Fatalf("Open of a held store: %v, want KindLocked naming pid %d", err, cmd.Process.Pid)
	}
	if took := time.Since(start); took < stuckAfter {
		t.Fatalf("gave up after %v, want after %v", took, stuckAfter)
	}
	if len(said) != 1 || !strings.Contains(said[0], "waiting for the store") {
		t.Fatalf("Open said %q while it waited, want one line that it waits", said)
	}

}

// Closing a deck ends its feeds, with an error that says it was closed,
// whether it is the owner or works through one.
func TestCloseEndsFeeds(t *testing.T) {
	dir, mcp := t.TempDir(), startDemo(t)
	a := open(t, dir, own(t, dir, mcp.URL))
	b := open(t, dir, own(t, dir, mcp.URL))
	r, err := Dial(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		d    deck.Deck
	}{{"through the owner", b}, {"dialled", r}, {"the owner", a}} {
		feed, err := c.d.Watch(t.Context(), 0)
		if err != nil {
			t.Fatal(err)
		}
		nextOf(t, feed, deck.EventSnapshot)
		c.d.Close()
		for range feed.Events() {
		}
		if feed.Err() != errClosed {
			t.Fatalf("%s: the feed ended with %v, want %v", c.name, feed.Err(), errClosed)
		}
		if _, err := c.d.Watch(t.Context(), 0); err != errClosed {
			t.Fatalf("%s: Watch after Close: %v", c.name, err)
		}
	}
}

// Three clients call in parallel while the owner exits: every call gets
// its record. The keyed ones cut off are sent again (the key makes that
// safe); an unkeyed one never is, and the owner's exit cuts none off: it
// removes the socket first (a call that finds none goes to the next
// owner) and answers every request that reached it.
func TestParallelCallsAcrossOwnerExit(t *testing.T) {
	ctx := t.Context()
	dir, mcp := t.TempDir(), startDemo(t)
	a := open(t, dir, own(t, dir, mcp.URL))
	const perClient = 20
	var mu sync.Mutex
	ok := 0
	var wg sync.WaitGroup
	for i := range 3 {
		c := open(t, dir, own(t, dir, mcp.URL))
		wg.Go(func() {
			for k := range perClient {
				key := ""
				if k%2 == 0 {
					key = fmt.Sprintf("c%d-%d", i, k)
				}
				_, err := c.Call(ctx, sleepCall(key))
				if err != nil {
					t.Errorf("call %q: %v (%v)", key, err, errors.Unwrap(err))
					continue
				}
				mu.Lock()
				ok++
				mu.Unlock()
			}
		})
	}
	waitFor(t, "calls before the owner exits", 5*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return ok >= 15 })
	closing := time.Now()
	a.Close()
	t.Logf("the owner closed in %v", time.Since(closing))
	wg.Wait()
	t.Logf("the calls ended %v after", time.Since(closing))
	d := open(t, dir, own(t, dir, mcp.URL))
	list, err := d.List(ctx, deck.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]int{}
	for _, e := range list {
		if e.Task.IdempotencyKey != "" {
			keys[e.Task.IdempotencyKey]++
		}
	}
	if len(keys) != 3*perClient/2 || len(list) != 3*perClient || ok != 3*perClient {
		t.Fatalf("%d calls answered, %d records, %d keys; want %d, %d, %d", ok, len(list), len(keys), 3*perClient, 3*perClient, 3*perClient/2)
	}
}

// Without Own, Open only connects: where no owner runs it says so, and
// takes no store.
func TestOpenWithoutOwn(t *testing.T) {
	dir := t.TempDir()
	if _, err := Open(t.Context(), Options{DataDir: dir}); !errors.Is(err, ErrNoOwner) {
		t.Fatalf("Open without Own and without an owner: %v, want ErrNoOwner", err)
	}
	mcp := startDemo(t)
	a := open(t, dir, own(t, dir, mcp.URL))
	b, err := Open(t.Context(), Options{DataDir: dir})
	if err != nil || b.Owner() {
		t.Fatalf("Open without Own beside an owner: %v", err)
	}
	defer b.Close()
	a.Close()
	if _, err := b.List(t.Context(), deck.Filter{}); !errors.Is(err, ErrNoOwner) {
		t.Fatalf("after the owner exits: %v, want ErrNoOwner", err)
	}
}

// startChild runs test (a helper process of this test binary) with env
// added, waits for its "ready" line, and SIGKILLs it when the test ends.
func startChild(t *testing.T, test string, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$")
	cmd.Env = append(os.Environ(), env...)
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(cmd.Process.Pid, syscall.SIGKILL); cmd.Wait() })
	if line, _ := bufio.NewReader(stdout).ReadString('\n'); line != "ready\n" {
		t.Fatalf("%s said %q, not ready", test, line)
	}
	return cmd
}
