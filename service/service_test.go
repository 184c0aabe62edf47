package service

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/model"
)

var demoRef = model.ServerRef{Name: "demo"}

func sleepCall(key string) deck.CallRequest {
	return deck.CallRequest{Server: demoRef, Tool: "sleep", Args: json.RawMessage(`{"seconds":1}`), Key: key}
}

// serveStoreDeck serves a storeDeck on a fresh data dir and dials it.
func serveStoreDeck(t *testing.T) (dir string, d *storeDeck, srv *Server, r deck.Deck) {
	t.Helper()
	dir = t.TempDir()
	d, err := openStoreDeck(t, dir, newRevLog())
	if err != nil {
		t.Fatal(err)
	}
	srv, err = Serve(t.Context(), dir, d, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		srv.Shutdown(context.Background())
		d.Close()
	})
	r, err = Dial(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return dir, d, srv, r
}

func wantKind(t *testing.T, what string, err error, kind deck.Kind) *deck.Error {
	t.Helper()
	var de *deck.Error
	if !errors.As(err, &de) || de.Kind != kind {
		t.Fatalf("%s: got %v (kind %q), want a *deck.Error of kind %q", what, err, deck.KindOf(err), kind)
	}
	if strings.Contains(de.Message, "\n") || de.Message == "" {
		t.Fatalf("%s: the message is not one line: %q", what, de.Message)
	}
	return de
}

// Every method answers over the socket what it answers in process, and
// every error arrives as a *deck.Error of its kind.
func TestRoundTrip(t *testing.T) {
	ctx := t.Context()
	_, d, _, r := serveStoreDeck(t)

	res, err := r.Call(ctx, sleepCall("k1"))
	if err != nil {
		t.Fatal(err)
	}
	id := res.Task.ID
	in, err := d.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, res.Task, in.Task)

	again, err := r.Call(ctx, sleepCall("k1"))
	if err != nil || !again.Reused || again.Task.ID != id {
		t.Fatalf("the same key again: %+v, %v; want the record %s reused", again, err, id)
	}
	other := sleepCall("k1")
	other.Args = json.RawMessage(`{"seconds":2}`)
	_, err = r.Call(ctx, other)
	if de := wantKind(t, "a key of another call", err, deck.KindConflict); de.TaskID != id {
		t.Fatalf("the conflict names task %q, want %s", de.TaskID, id)
	}

	got, err := r.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, got, in)
	if got.Poll.LastError != "slow" {
		t.Fatalf("the poll state did not cross: %+v", got.Poll)
	}
	list, err := r.List(ctx, deck.Filter{Tool: "sleep"})
	if err != nil {
		t.Fatal(err)
	}
	inList, _ := d.List(ctx, deck.Filter{Tool: "sleep"})
	sameJSON(t, list, inList)
	servers, err := r.Servers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	inServers, _ := d.Servers(ctx)
	sameJSON(t, servers, inServers)
	tools, err := r.Tools(ctx, demoRef, true)
	if err != nil {
		t.Fatal(err)
	}
	inTools, _ := d.Tools(ctx, demoRef, true)
	sameJSON(t, tools, inTools)
	if err := r.CheckCall(ctx, sleepCall("")); err != nil {
		t.Fatal(err)
	}
	if err := r.PollNow(ctx, []string{id}); err != nil {
		t.Fatal(err)
	}

	bad := sleepCall("")
	bad.Tool = "nope"
	wantKind(t, "CheckCall of an unknown tool", r.CheckCall(ctx, bad), deck.KindUsage)
	_, err = r.Call(ctx, bad)
	wantKind(t, "Call of an unknown tool", err, deck.KindUsage)
	_, err = r.Tools(ctx, model.ServerRef{Name: "nope"}, false)
	wantKind(t, "Tools of an unknown server", err, deck.KindUsage)
	_, err = r.Get(ctx, "nope")
	wantKind(t, "Get of an unknown id", err, deck.KindNotFound)
	wantKind(t, "PollNow of an unknown id", r.PollNow(ctx, []string{"nope"}), deck.KindNotFound)
	_, err = r.Answer(ctx, id, map[string]json.RawMessage{"a": json.RawMessage(`{}`)})
	if de := wantKind(t, "Answer of a working task", err, deck.KindState); de.TaskID != id {
		t.Fatalf("the state error names task %q, want %s", de.TaskID, id)
	}
	_, err = r.Continue(ctx, id, nil)
	wantKind(t, "Continue of a started task", err, deck.KindState)

	cancelled, err := r.Cancel(ctx, id)
	if err != nil || cancelled.Status != model.StatusCancelled {
		t.Fatalf("Cancel: %+v, %v", cancelled, err)
	}
	_, err = r.Cancel(ctx, id)
	wantKind(t, "Cancel of a cancelled task", err, deck.KindState)
	n, err := r.Prune(ctx, 0)
	if err != nil || n != 1 {
		t.Fatalf("Prune: %d, %v; want the one cancelled record", n, err)
	}
	res2, err := r.Call(ctx, sleepCall(""))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Forget(ctx, res2.Task.ID); err != nil {
		t.Fatal(err)
	}
	wantKind(t, "Forget of a forgotten id", r.Forget(ctx, res2.Task.ID), deck.KindNotFound)
	if _, err := d.Get(ctx, res2.Task.ID); deck.KindOf(err) != deck.KindNotFound {
		t.Fatalf("the forgotten record is still in the store: %v", err)
	}
}

// A Watch over the socket delivers the snapshot, then each change as it
// commits, in revision order.
func TestWatchStreams(t *testing.T) {
	ctx := t.Context()
	_, _, _, r := serveStoreDeck(t)
	first, err := r.Call(ctx, sleepCall(""))
	if err != nil {
		t.Fatal(err)
	}
	feed, err := r.Watch(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	snap := next(t, feed)
	if snap.Kind != deck.EventSnapshot || len(snap.Entries) != 1 || snap.Entries[0].Task.ID != first.Task.ID {
		t.Fatalf("first event: %+v, want a snapshot of task %s", snap, first.Task.ID)
	}
	second, err := r.Call(ctx, sleepCall(""))
	if err != nil {
		t.Fatal(err)
	}
	ev := next(t, feed)
	if ev.Kind != deck.EventChange || ev.Rev != snap.Rev+1 || ev.Entries[0].Task.ID != second.Task.ID {
		t.Fatalf("after a call: %+v, want the change of task %s at rev %d", ev, second.Task.ID, snap.Rev+1)
	}
	// From a revision: the changes after it, then caught up.
	resumed, err := r.Watch(ctx, snap.Rev)
	if err != nil {
		t.Fatal(err)
	}
	if ev := next(t, resumed); ev.Rev != snap.Rev+1 || ev.Kind != deck.EventChange {
		t.Fatalf("Watch(%d) began with %+v", snap.Rev, ev)
	}
	if ev := next(t, resumed); ev.Kind != deck.EventCaughtUp {
		t.Fatalf("Watch(%d) went on with %+v, want caughtUp", snap.Rev, ev)
	}
}

func next(t *testing.T, f deck.Feed) deck.Event {
	t.Helper()
	select {
	case ev, ok := <-f.Events():
		if !ok {
			t.Fatalf("the feed ended: %v", f.Err())
		}
		return ev
	case <-time.After(5 * time.Second):
		t.Fatal("no event within 5 s")
	}
	panic("unreachable")
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestSocketIsPrivate(t *testing.T) {
	dir, _, srv, _ := serveStoreDeck(t)
	fi, err := os.Lstat(srv.Path())
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Type() != os.ModeSocket || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode %v, want a socket 0600", fi.Mode())
	}
	if srv.Path() != filepath.Join(dir, SocketName) {
		t.Fatalf("socket at %s, want in the data dir %s", srv.Path(), dir)
	}
}

// A second Serve on a socket someone answers on is refused; the first
// owner goes on serving.
func TestServeRefusesASecondOwner(t *testing.T) {
	dir, d, _, r := serveStoreDeck(t)
	if _, err := Serve(t.Context(), dir, d, nil); !errors.Is(err, ErrOwnerRunning) {
		t.Fatalf("second Serve: %v, want ErrOwnerRunning", err)
	}
	if _, err := r.Servers(t.Context()); err != nil {
		t.Fatalf("the first owner stopped answering: %v", err)
	}
}

// A socket file a killed owner left is replaced by the next owner.
func TestStaleSocketReplaced(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, SocketName)
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	l.Close()
	if _, err := Dial(t.Context(), dir); !errors.Is(err, ErrNoOwner) {
		t.Fatalf("Dial on a stale socket: %v, want ErrNoOwner", err)
	}
	d, err := openStoreDeck(t, dir, newRevLog())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	srv, err := Serve(t.Context(), dir, d, nil)
	if err != nil {
		t.Fatalf("Serve over a stale socket: %v", err)
	}
	defer srv.Shutdown(context.Background())
	r, err := Dial(t.Context(), dir)
	if err != nil {
		t.Fatalf("Dial after the stale socket was replaced: %v", err)
	}
	r.Close()
}

// What is at the socket's path and is not a socket is never followed,
// removed or served on.
func TestSocketPathNotASocket(t *testing.T) {
	for _, c := range []struct {
		name, want string
		make       func(path, target string) error
	}{
		{"regular file", "is not a socket (a regular file)", func(p, _ string) error { return os.WriteFile(p, []byte("keep"), 0o600) }},
		{"symlink", "is not a socket (a symbolic link)", func(p, target string) error { return os.Symlink(target, p) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			target := filepath.Join(t.TempDir(), "target")
			os.WriteFile(target, []byte("keep"), 0o600)
			path := filepath.Join(dir, SocketName)
			if err := c.make(path, target); err != nil {
				t.Fatal(err)
			}
			d, err := openStoreDeck(t, dir, newRevLog())
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			_, err = Serve(t.Context(), dir, d, nil)
			if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("Serve: %v, want one line saying it %s", err, c.want)
			}
			if b, err := os.ReadFile(target); err != nil || string(b) != "keep" {
				t.Fatalf("the target was touched: %q, %v", b, err)
			}
			if _, err := os.Lstat(path); err != nil {
				t.Fatalf("the file at the socket's path was removed: %v", err)
			}
		})
	}
}

func TestSocketPathTooDeep(t *testing.T) {
	deep := filepath.Join(t.TempDir(), strings.Repeat("d", 100))
	_, err := SocketPath(deep)
	if err == nil || !strings.Contains(err.Error(), "too deep") || !strings.Contains(err.Error(), "shorter --data-dir") {
		t.Fatalf("SocketPath of a deep dir: %v, want a one-line error asking for a shorter --data-dir", err)
	}
	if _, err := Dial(t.Context(), deep); deck.KindOf(err) != deck.KindUsage {
		t.Fatalf("Dial of a deep dir: %v, want a usage error", err)
	}
}

// Shutdown lets a request in flight finish and answer, ends the feeds
// (their watchers learn the owner went), and removes the socket.
func TestShutdownDrains(t *testing.T) {
	ctx := t.Context()
	dir, d, srv, r := serveStoreDeck(t)
	feed, err := r.Watch(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	next(t, feed)
	d.hold, d.entered = make(chan struct{}), make(chan struct{}, 1)
	called := make(chan error, 1)
	go func() {
		_, err := r.Call(ctx, sleepCall(""))
		called <- err
	}()
	<-d.entered
	stopped := make(chan error, 1)
	go func() { stopped <- srv.Shutdown(context.Background()) }()
	// The feed ends at once, while the call is still held.
	for range feed.Events() {
	}
	wantKind(t, "the feed's end", feed.Err(), deck.KindOwnerGone)
	waitFor(t, "the socket removed", 5*time.Second, func() bool {
		_, err := os.Lstat(srv.Path())
		return errors.Is(err, os.ErrNotExist)
	})
	if _, err := Dial(ctx, dir); !errors.Is(err, ErrNoOwner) {
		t.Fatalf("Dial while shutting down: %v, want ErrNoOwner", err)
	}
	select {
	case err := <-stopped:
		t.Fatalf("Shutdown returned (%v) with a request in flight", err)
	default:
	}
	close(d.hold)
	if err := <-called; err != nil {
		t.Fatalf("the request in flight: %v, want it finished", err)
	}
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
}

// A request over the bound is refused with a usage error, unread.
func TestRequestBounded(t *testing.T) {
	_, _, srv, _ := serveStoreDeck(t)
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", srv.Path())
	}}}
	// Declared too long, it is refused before it is read.
	req, _ := http.NewRequest(http.MethodPost, "http://taskdeck"+pathCall, io.LimitReader(zeros{}, maxRequest+1))
	req.ContentLength = maxRequest + 1
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var de deck.Error
	json.NewDecoder(resp.Body).Decode(&de)
	if resp.StatusCode != http.StatusBadRequest || de.Kind != deck.KindUsage || !strings.Contains(de.Message, "MiB") {
		t.Fatalf("an oversized request: %s %+v, want a usage error naming the bound", resp.Status, de)
	}
}

// zeros is an endless string of 'a's (a per-byte loop is slow under -race).
type zeros struct{}

var aaaa = bytes.Repeat([]byte("a"), 64<<10)

func (zeros) Read(p []byte) (int, error) { return copy(p, aaaa), nil }

// Serve makes a data directory others can read private before it makes
// the socket in it.
func TestServeMakesTheDirPrivate(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	srv, err := Serve(t.Context(), dir, &storeDeck{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(context.Background())
	if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o700 {
		t.Fatalf("data dir %v after Serve, want 0700", fi.Mode().Perm())
	}
}

// An owner that accepts and never answers is named as stuck, in one
// line, instead of hanging the command.
func TestDialStuckOwner(t *testing.T) {
	dir := t.TempDir()
	l, err := net.Listen("unix", filepath.Join(dir, SocketName))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	defer func(d time.Duration) { pingTimeout = d }(pingTimeout)
	pingTimeout = 100 * time.Millisecond
	_, err = Dial(t.Context(), dir)
	if de := wantKind(t, "Dial of a stuck owner", err, deck.KindUnreachable); !strings.Contains(de.Message, "does not answer") {
		t.Fatalf("the message: %q", de.Message)
	}
}

// A client that connects and sends nothing holds the owner's exit up
// only for idleGrace, not for the whole drain.
func TestShutdownSilentClient(t *testing.T) {
	_, _, srv, _ := serveStoreDeck(t)
	c, err := net.Dial("unix", srv.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	if err := srv.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > idleGrace+time.Second {
		t.Fatalf("Shutdown took %v with a silent client, want about %v", took, idleGrace)
	}
}
