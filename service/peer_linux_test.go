package service

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/internal/waitfor"
)

func TestCheckPeer(t *testing.T) {
	uid := os.Geteuid()
	if err := checkPeer(&syscall.Ucred{Pid: 1, Uid: uint32(uid)}, uid); err != nil {
		t.Fatalf("a peer of the same uid was refused: %v", err)
	}
	err := checkPeer(&syscall.Ucred{Pid: 7, Uid: uint32(uid + 1)}, uid)
	if err == nil || !strings.Contains(err.Error(), "pid 7") {
		t.Fatalf("a peer of another uid: %v, want refused, naming its pid", err)
	}
	if checkPeer(nil, uid) == nil {
		t.Fatal("a peer without credentials was admitted")
	}
}

// A process of another user that reaches the socket is refused before a
// byte is read: the test binary re-run as nobody (uid 65534), with the
// directory and the socket opened up so that only the peer check stands
// in its way. With them as Serve leaves them, it cannot even connect.
func TestOtherUserRefused(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to run a process as another user (uid 65534)")
	}
	const nobody = 65534
	if os.Getuid() == nobody {
		t.Skip("runs as nobody already")
	}
	// A tree nobody may traverse: t.TempDir's parents are 0700.
	top, err := os.MkdirTemp("", "peer")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(top) })
	os.Chmod(top, 0o755)
	bin := filepath.Join(top, "service.test")
	if err := copyFile(os.Args[0], bin); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(top, "data")
	e, err := openEngine(t, dir, startDemo(t).URL)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	var logged syncBuffer
	srv, err := Serve(t.Context(), dir, e, slog.New(slog.NewTextHandler(&logged, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(context.Background())

	asNobody := func() string {
		cmd := exec.Command(bin, "-test.run=^TestPeerChild$")
		cmd.Env = append(os.Environ(), "TASKDECK_SERVICE_PEER_SOCKET="+srv.Path())
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
		out, err := cmd.CombinedOutput()
		if err != nil && !strings.Contains(string(out), "peer:") {
			t.Fatalf("the child as nobody: %v\n%s", err, out)
		}
		return string(out)
	}
	if out := asNobody(); !strings.Contains(out, "peer: connect:") || !strings.Contains(out, "permission denied") {
		t.Fatalf("nobody reached the socket Serve made private:\n%s", out)
	}
	os.Chmod(dir, 0o755)
	os.Chmod(srv.Path(), 0o666)
	out := asNobody()
	if !strings.Contains(out, "peer: read 0 bytes") {
		t.Fatalf("nobody was answered:\n%s", out)
	}
	waitFor(t, "the refusal logged", 5*time.Second, func() bool {
		return strings.Contains(logged.String(), "refused a connection") && strings.Contains(logged.String(), "uid 65534")
	})
	// The owner's own user is still served.
	r, err := Dial(t.Context(), dir)
	if err != nil {
		t.Fatalf("the owner's user after the refusal: %v", err)
	}
	r.Close()
}

// TestPeerChild is the other user's process of TestOtherUserRefused: it
// connects, asks, and says what came back.
func TestPeerChild(t *testing.T) {
	path := os.Getenv("TASKDECK_SERVICE_PEER_SOCKET")
	if path == "" {
		t.Skip("the child of TestOtherUserRefused")
	}
	c, err := net.Dial("unix", path)
	if err != nil {
		fmt.Printf("peer: connect: %v\n", err)
		return
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(waitfor.Scale(5 * time.Second)))
	fmt.Fprintf(c, "GET /v1/ping HTTP/1.1\r\nHost: taskdeck\r\n\r\n")
	b, err := io.ReadAll(c)
	fmt.Printf("peer: read %d bytes (%v) %q\n", len(b), err, b)
}

func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o755)
}

// syncBuffer is a log sink the server's goroutines write while the test
// reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
