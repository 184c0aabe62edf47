package service

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/deck"
)

// startSlowOwner runs, in a child process, an owner that takes busyFor to
// answer each ping, working the CPU meanwhile (an owner busy serving
// others): a fake for a fault a real owner shows only under heavy load,
// behind the real socket.
func startSlowOwner(t *testing.T, dir string, busyFor time.Duration) *exec.Cmd {
	return startChild(t, "TestSlowOwnerProcess", "TASKDECK_SLOW_OWNER_DIR="+dir, "TASKDECK_SLOW_OWNER_BUSY="+busyFor.String())
}

func TestSlowOwnerProcess(t *testing.T) {
	dir := os.Getenv("TASKDECK_SLOW_OWNER_DIR")
	if dir == "" {
		t.Skip("the owner process of TestDialWaitsForABusyOwner")
	}
	busyFor, _ := time.ParseDuration(os.Getenv("TASKDECK_SLOW_OWNER_BUSY"))
	l, err := net.Listen("unix", filepath.Join(dir, SocketName))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println("ready")
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			req, err := http.ReadRequest(bufio.NewReader(c))
			if err != nil {
				return
			}
			req.Body.Close()
			for start := time.Now(); time.Since(start) < busyFor; {
			}
			b, _ := json.Marshal(pingResp{Protocol: protocol, PID: os.Getpid()})
			fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", len(b), b)
		}()
	}
}

// An owner slower than the ping timeout but working is waited for; one
// that does not work (stopped) is named as stuck, without that wait.
func TestDialWaitsForABusyOwner(t *testing.T) {
	defer func(d time.Duration) { pingTimeout = d }(pingTimeout)
	pingTimeout = 500 * time.Millisecond
	dir := t.TempDir()
	owner := startSlowOwner(t, dir, 2*pingTimeout)
	start := time.Now()
	r, err := Dial(t.Context(), dir)
	if err != nil {
		t.Fatalf("Dial of a busy owner (answers after %v): %v", 2*pingTimeout, err)
	}
	r.Close()
	t.Logf("a busy owner answered after %v", time.Since(start).Round(time.Millisecond))

	syscall.Kill(owner.Process.Pid, syscall.SIGSTOP)
	defer syscall.Kill(owner.Process.Pid, syscall.SIGCONT)
	start = time.Now()
	_, err = Dial(t.Context(), dir)
	if de := wantKind(t, "Dial of a stopped owner", err, deck.KindUnreachable); de == nil {
		return
	}
	if took := time.Since(start); took >= busyRounds*pingTimeout {
		t.Fatalf("a stopped owner was waited for %v, as long as for a busy one", took)
	}
}
