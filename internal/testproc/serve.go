package testproc

import (
	"bytes"
	"net/http"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/internal/waitfor"
)

// Serve starts cmd, a server a test needs (Prometheus, Jaeger), in a
// group of its own (Group), and returns once readyURL answers 200 (30 s
// scaled). At the test's end it is sent SIGTERM, then its group is
// killed after 10 s (scaled); a failed test prints the tail of what it
// wrote.
func Serve(t testing.TB, cmd *exec.Cmd, name, readyURL string) {
	t.Helper()
	Group(cmd)
	log := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		Stop(cmd, syscall.SIGTERM, waitfor.Scale(10*time.Second), exited)
		if t.Failed() {
			t.Logf("%s log:\n%s", name, log.tail())
		}
	})
	waitfor.Within(t, 30*time.Second, name+" to be ready", func() bool {
		select {
		case <-exited:
			t.Fatalf("%s exited: %s", name, log.tail())
		default:
		}
		resp, err := http.Get(readyURL)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// lockedBuffer holds what a server writes, read while it writes.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// tail is the last 3,000 bytes written.
func (b *lockedBuffer) tail() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.buf.String()
	return s[max(0, len(s)-3000):]
}
