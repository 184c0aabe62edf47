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

// The real engine behind the socket: each method answers what it answers
// in process, a call that needs input before its task exists costs 2
// tools/call through the socket too, and errors keep their kinds.
func TestRoundTrip(t *testing.T) {
	ctx := t.Context()
	mcp := startDemo(t)
	_, e, _, r := serveEngine(t, mcp)

	res, err := r.Call(ctx, sleepCall("k"))
	if err != nil || res.Task.TaskID == "" || res.Task.Status != model.StatusWorking {
		t.Fatalf("Call: %+v, %v; want a working task with its handle", res, err)
	}
	again, err := r.Call(ctx, sleepCall("k"))
	if err != nil || !again.Reused || again.Task.ID != res.Task.ID {
		t.Fatalf("the same key again: %+v, %v; want the record reused", again, err)
	}
	in, err := e.Get(ctx, res.Task.ID[:12])
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.Get(ctx, res.Task.ID[:12])
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, got.Task, in.Task)
	list, err := r.List(ctx, deck.Filter{Statuses: []model.Status{model.StatusWorking}})
	if err != nil || len(list) != 1 || list[0].Task.ID != res.Task.ID {
		t.Fatalf("List: %d entries, %v", len(list), err)
	}
	servers, err := r.Servers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	inServers, _ := e.Servers(ctx)
	sameJSON(t, servers, inServers)
	tools, err := r.Tools(ctx, demoRef, false)
	if err != nil {
		t.Fatal(err)
	}
	inTools, _ := e.Tools(ctx, demoRef, false)
	sameJSON(t, tools, inTools)
	need, err := r.Call(ctx, deck.CallRequest{Server: demoRef, Tool: "confirm_first"})
	if err != nil || !need.NeedsInput {
		t.Fatalf("confirm_first: %+v, %v; want NeedsInput", need, err)
	}
	cont, err := r.Continue(ctx, need.Task.ID, confirmYes)
	if err != nil || cont.Task.TaskID == "" {
		t.Fatalf("Continue: %+v, %v", cont, err)
	}
	if n := mcp.Calls("confirm_first"); n != 2 {
		t.Fatalf("%d tools/call for one round of input through the socket, want 2", n)
	}

	bad := deck.CallRequest{Server: demoRef, Tool: "sleep", Args: json.RawMessage(`{"seconds":"long"}`)}
	sent := mcp.Calls("sleep")
	_, err = r.Call(ctx, bad)
	wantKind(t, "Call of a bad argument", err, deck.KindUsage)
	if n := mcp.Calls("sleep") - sent; n != 0 {
		t.Fatalf("%d tools/call of a bad argument through the socket, want none", n)
	}
	other := sleepCall("k")
	other.Args = json.RawMessage(`{"seconds":61}`)
	_, err = r.Call(ctx, other)
	wantKind(t, "a key of another call", err, deck.KindConflict)
	_, err = r.Get(ctx, "zzzzzzzz")
	wantKind(t, "Get of an unknown id", err, deck.KindNotFound)
	_, err = r.Answer(ctx, res.Task.ID, confirmYes)
	wantKind(t, "Answer of a task that asks nothing", err, deck.KindState)
	_, err = r.Continue(ctx, res.Task.ID, confirmYes)
	wantKind(t, "Continue of a started task", err, deck.KindState)
	wantKind(t, "Forget of an unknown id", r.Forget(ctx, "zzzzzzzz"), deck.KindNotFound)

	cancelled, err := r.Cancel(ctx, res.Task.ID)
	if err != nil || !cancelled.CancelRequested && cancelled.Status != model.StatusCancelled {
		t.Fatalf("Cancel: %+v, %v", cancelled, err)
	}
	if err := r.PollNow(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if err := r.Forget(ctx, cont.Task.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Get(ctx, cont.Task.ID); deck.KindOf(err) != deck.KindNotFound {
		t.Fatalf("after Forget over the socket the engine still has it: %v", err)
	}
	waitFor(t, "the cancel to land", 5*time.Second, func() bool {
		got, err := e.Get(ctx, res.Task.ID)
		return err == nil && got.Task.Status == model.StatusCancelled
	})
	n, err := r.Prune(ctx, 0)
	if err != nil || n != 1 {
		t.Fatalf("Prune: %d, %v; want the cancelled record", n, err)
	}
}

// A Watch over the socket delivers the snapshot, then each change as it
// commits, in revision order; Watch(rev) replays what came after rev.
func TestWatchStreams(t *testing.T) {
	ctx := t.Context()
	_, _, _, r := serveEngine(t, startDemo(t))
	first, err := r.Call(ctx, sleepCall(""))
	if err != nil {
		t.Fatal(err)
	}
	feed, err := r.Watch(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	snap := nextOf(t, feed, deck.EventSnapshot)
	if len(snap.Entries) != 1 || snap.Entries[0].Task.ID != first.Task.ID {
		t.Fatalf("the snapshot: %+v, want task %s", snap, first.Task.ID)
	}
	second, err := r.Call(ctx, sleepCall(""))
	if err != nil {
		t.Fatal(err)
	}
	for ev := nextOf(t, feed, deck.EventChange); len(ev.Entries) == 0 || ev.Entries[0].Task.ID != second.Task.ID; {
		ev = nextOf(t, feed, deck.EventChange)
	}
	resumed, err := r.Watch(ctx, snap.Rev)
	if err != nil {
		t.Fatal(err)
	}
	// The replay: only changes after snap.Rev, the second task's among
	// them, then caught up.
	seen := false
	for {
		ev := nextOf(t, resumed, deck.EventChange, deck.EventSnapshot, deck.EventCaughtUp)
		if ev.Kind == deck.EventCaughtUp {
			break
		}
		if ev.Kind != deck.EventChange || ev.Rev <= snap.Rev {
			t.Fatalf("Watch(%d) replayed %s at rev %d", snap.Rev, ev.Kind, ev.Rev)
		}
		seen = seen || ev.Entries[0].Task.ID == second.Task.ID
	}
	if !seen {
		t.Fatalf("Watch(%d) did not replay the second call", snap.Rev)
	}
}

func TestSocketIsPrivate(t *testing.T) {
	dir, _, srv, _ := serveEngine(t, startDemo(t))
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
	dir, e, _, r := serveEngine(t, startDemo(t))
	if _, err := Serve(t.Context(), dir, e, nil); !errors.Is(err, ErrOwnerRunning) {
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
	e, err := openEngine(t, dir, startDemo(t).URL)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	srv, err := Serve(t.Context(), dir, e, nil)
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
			e, err := openEngine(t, dir, "http://127.0.0.1:1/mcp")
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			_, err = Serve(t.Context(), dir, e, nil)
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

// A data directory far deeper than a unix socket path allows is served
// and reached all the same, its socket in it, removed at Shutdown.
func TestSocketInADeepDataDir(t *testing.T) {
	dir := t.TempDir()
	for len(dir) < 200 {
		dir = filepath.Join(dir, strings.Repeat("d", 40))
	}
	e, err := openEngine(t, dir, startDemo(t).URL)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	srv, err := Serve(t.Context(), dir, e, nil)
	if err != nil {
		t.Fatalf("Serve in a %d-byte-deep data dir: %v", len(dir), err)
	}
	if fi, err := os.Lstat(filepath.Join(dir, SocketName)); err != nil || fi.Mode().Type() != os.ModeSocket {
		t.Fatalf("no socket in the data dir: %v", err)
	}
	r, err := Dial(t.Context(), dir)
	if err != nil {
		t.Fatalf("Dial in a %d-byte-deep data dir: %v", len(dir), err)
	}
	defer r.Close()
	if _, err := r.List(t.Context(), deck.Filter{}); err != nil {
		t.Fatalf("List through the socket: %v", err)
	}
	if err := srv.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(dir, SocketName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the socket is left after Shutdown: %v", err)
	}
}

// Shutdown lets a request in flight finish and answer, ends the feeds
// (their watchers learn the owner went), and removes the socket.
func TestShutdownDrains(t *testing.T) {
	ctx := t.Context()
	mcp := startDemo(t)
	dir, _, srv, r := serveEngine(t, mcp)
	feed, err := r.Watch(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	nextOf(t, feed, deck.EventSnapshot)
	held := mcp.Hold("tools/call")
	called := make(chan error, 1)
	go func() {
		_, err := r.Call(ctx, sleepCall(""))
		called <- err
	}()
	waitFor(t, "the call at the server", 5*time.Second, func() bool { return mcp.Calls("sleep") == 1 })
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
	held.Release()
	if err := <-called; err != nil {
		t.Fatalf("the request in flight: %v, want it finished", err)
	}
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
}

// A request over the bound is refused with a usage error, unread.
func TestRequestBounded(t *testing.T) {
	_, _, srv, _ := serveEngine(t, startDemo(t))
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

// A client older than Call's own check asks /v1/checkCall before each
// call: the owner still answers it, and the call that follows is checked.
func TestOlderClientsCheckCallIsAnswered(t *testing.T) {
	_, _, srv, _ := serveEngine(t, startDemo(t))
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", srv.Path())
	}}}
	body, _ := json.Marshal(deck.CallRequest{Server: demoRef, Tool: "sleep", Args: json.RawMessage(`{"seconds":1}`)})
	resp, err := c.Post("http://taskdeck"+pathCheckCall, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s: %s, want 200 for an older client", pathCheckCall, resp.Status)
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
	e, err := openEngine(t, t.TempDir(), "http://127.0.0.1:1/mcp")
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	srv, err := Serve(t.Context(), dir, e, nil)
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
	_, _, srv, _ := serveEngine(t, startDemo(t))
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

// A client never follows a symbolic link at its socket's path, to a live
// owner of another data dir least of all, nor talks to a socket another
// user made: it refuses in one line, as bad input.
func TestDialRefusesASocketNotItsOwn(t *testing.T) {
	other, _, _, _ := serveEngine(t, startDemo(t))
	t.Run("symlink", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.Symlink(filepath.Join(other, SocketName), filepath.Join(dir, SocketName)); err != nil {
			t.Fatal(err)
		}
		_, err := Dial(t.Context(), dir)
		if deck.KindOf(err) != deck.KindUsage || !strings.Contains(err.Error(), "is a symbolic link") || strings.Contains(err.Error(), "\n") {
			t.Fatalf("Dial through a symlink to another owner: %v, want one line refusing the symbolic link", err)
		}
	})
	t.Run("another user's", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("needs root to give the socket to another user")
		}
		dir, _, srv, _ := serveEngine(t, startDemo(t))
		if err := os.Lchown(srv.Path(), 65534, 65534); err != nil {
			t.Fatal(err)
		}
		_, err := Dial(t.Context(), dir)
		if deck.KindOf(err) != deck.KindUsage || !strings.Contains(err.Error(), "belongs to uid 65534") {
			t.Fatalf("Dial of another user's socket: %v, want one line refusing it", err)
		}
	})
}
