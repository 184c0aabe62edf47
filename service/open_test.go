package service

import (
	"bufio"
	"context"
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
)

// owner makes Open's Own over dir: a storeDeck sharing log, and the last
// one it opened in *last.
func owner(t *testing.T, dir string, log *revLog, last **storeDeck) func() (deck.Deck, error) {
	return func() (deck.Deck, error) {
		d, err := openStoreDeck(t, dir, log)
		if err == nil && last != nil {
			*last = d
		}
		if err != nil {
			return nil, err
		}
		return d, nil
	}
}

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
	dir, log := t.TempDir(), newRevLog()
	a := open(t, dir, owner(t, dir, log, nil))
	if !a.Owner() {
		t.Fatal("the first Open did not become the owner")
	}
	b := open(t, dir, owner(t, dir, log, nil))
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
	if !b.Owner() || took > time.Second {
		t.Fatalf("took over in %v (owner %v), want the owner within 1 s", took, b.Owner())
	}
	t.Logf("took over in %v", took)
}

// A feed survives the owner's exit: it resumes from the last revision it
// delivered, so its watcher sees every change once, in order.
func TestFeedResumesAcrossOwnerChange(t *testing.T) {
	ctx := t.Context()
	dir, log := t.TempDir(), newRevLog()
	a := open(t, dir, owner(t, dir, log, nil))
	w := open(t, dir, owner(t, dir, log, nil))
	feed, err := w.Watch(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if ev := next(t, feed); ev.Kind != deck.EventSnapshot {
		t.Fatalf("first event %+v, want the snapshot", ev)
	}
	// Calls commit through the owner while it exits; those that commit
	// before it goes must all reach the watcher.
	var made []string
	var mu sync.Mutex
	calls := make(chan struct{})
	go func() {
		defer close(calls)
		for range 200 {
			res, err := a.Call(ctx, sleepCall(""))
			if err != nil {
				return
			}
			mu.Lock()
			made = append(made, res.Task.ID)
			mu.Unlock()
		}
	}()
	waitFor(t, "calls before the exit", 5*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return len(made) >= 20 })
	a.Close()
	<-calls
	// Through the next owner (the watcher's process or a third), more.
	c := open(t, dir, owner(t, dir, log, nil))
	for range 20 {
		res, err := c.Call(ctx, sleepCall(""))
		if err != nil {
			t.Fatal(err)
		}
		made = append(made, res.Task.ID)
	}
	seen := map[string]int{}
	var rev uint64
	for len(seen) < len(made) {
		ev := next(t, feed)
		if ev.Kind != deck.EventChange {
			continue
		}
		if ev.Rev != rev+1 && rev != 0 {
			t.Fatalf("rev %d after %d: a change missed or seen twice", ev.Rev, rev)
		}
		rev = ev.Rev
		seen[ev.Entries[0].Task.ID]++
	}
	for _, id := range made {
		if seen[id] != 1 {
			t.Fatalf("task %s seen %d times, want once", id, seen[id])
		}
	}
	t.Logf("%d changes, the owner changed after %d", len(made), len(made)-20)
}

// A changing request cut off by the owner's exit fails with KindOwnerGone
// and is not sent again; a Call with a key is, and gets the record the
// first send committed.
func TestCutOffMidRequest(t *testing.T) {
	for _, key := range []string{"", "k"} {
		t.Run("key="+key, func(t *testing.T) {
			ctx := t.Context()
			dir, log := t.TempDir(), newRevLog()
			var first *storeDeck
			a := open(t, dir, owner(t, dir, log, &first))
			first.hold, first.entered = make(chan struct{}), make(chan struct{}, 1)
			b := open(t, dir, owner(t, dir, log, nil))
			type out struct {
				res deck.CallResult
				err error
			}
			done := make(chan out, 1)
			go func() {
				res, err := b.Call(ctx, sleepCall(key))
				done <- out{res, err}
			}()
			<-first.entered
			// The owner dies with the request in it: its connections go,
			// then the call it was making commits and its store closes.
			a.srv.http.Close()
			close(first.hold)
			first.inFlight.Wait()
			a.Close()
			o := <-done
			if key == "" {
				de := wantKind(t, "a call cut off", o.err, deck.KindOwnerGone)
				if !strings.Contains(de.Message, "went away") || !strings.Contains(de.Message, "taskdeck ls") {
					t.Fatalf("the message does not say what happened and where to look: %q", de.Message)
				}
				list, _ := b.List(ctx, deck.Filter{})
				if len(list) != 1 {
					t.Fatalf("%d records after the cut-off call, want the one the owner committed", len(list))
				}
				return
			}
			if o.err != nil || !o.res.Reused {
				t.Fatalf("a keyed call cut off: %+v, %v; want it retried and the committed record reused", o.res, o.err)
			}
		})
	}
}

// A changing request that never reached an owner (the owner was killed
// before it) is sent to the next one, and that one is this process
// within 1 s of the kill.
func TestTakeoverAfterSIGKILL(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestOwnerProcess$")
	cmd.Env = append(os.Environ(), "TASKDECK_SERVICE_OWNER_DIR="+dir)
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(cmd.Process.Pid, syscall.SIGKILL); cmd.Wait() })
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	if line != "ready\n" {
		t.Fatalf("the owner process said %q", line)
	}
	b := open(t, dir, owner(t, dir, newRevLog(), nil))
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
	if !b.Owner() || took > time.Second {
		t.Fatalf("took over in %v (owner %v), want within 1 s", took, b.Owner())
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
	d, err := openStoreDeck(t, dir, newRevLog())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Serve(context.Background(), dir, d, nil); err != nil {
		t.Fatal(err)
	}
	fmt.Println("ready")
	select {}
}

// Open gives up with the store's own error when the store is held by a
// process that serves nothing, after trying for about 2 s.
func TestOpenLockedWithoutOwner(t *testing.T) {
	dir := t.TempDir()
	d, err := openStoreDeck(t, dir, newRevLog())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	start := time.Now()
	_, err = Open(t.Context(), Options{DataDir: dir, Own: owner(t, dir, newRevLog(), nil)})
	if deck.KindOf(err) != deck.KindLocked {
		t.Fatalf("Open of a held store: %v, want KindLocked", err)
	}
	if took := time.Since(start); took < chooseFor || took > chooseFor+time.Second {
		t.Fatalf("gave up after %v, want about %v", took, chooseFor)
	}
}

// Closing a deck ends its feeds, with an error that says it was closed,
// whether it is the owner or works through one.
func TestCloseEndsFeeds(t *testing.T) {
	dir, log := t.TempDir(), newRevLog()
	a := open(t, dir, owner(t, dir, log, nil))
	b := open(t, dir, owner(t, dir, log, nil))
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
		next(t, feed)
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
	dir, log := t.TempDir(), newRevLog()
	a := open(t, dir, owner(t, dir, log, nil))
	const perClient = 40
	var mu sync.Mutex
	ok := 0
	var wg sync.WaitGroup
	for i := range 3 {
		c := open(t, dir, owner(t, dir, log, nil))
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
	waitFor(t, "calls before the owner exits", 5*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return ok >= 30 })
	closing := time.Now()
	a.Close()
	t.Logf("the owner closed in %v", time.Since(closing))
	wg.Wait()
	t.Logf("the calls ended %v after", time.Since(closing))
	d := open(t, dir, owner(t, dir, log, nil))
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
