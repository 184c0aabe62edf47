// Package clitest holds what the command line's tests share, in process
// (internal/cli) and against the built binary (e2e): a finished
// command's result and the checks a user would make of it.
package clitest

import (
	"bytes"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/internal/testproc"
	"github.com/taskdeck/taskdeck/internal/waitfor"
)

// Generous deadlines, under waitfor.Slowdown: they bound a hang, they do
// not measure speed.
var (
	CmdTimeout  = waitfor.Scale(60 * time.Second)
	WaitTimeout = waitfor.Scale(waitBase)
)

const waitBase = 20 * time.Second

// Result is what one finished command left behind.
type Result struct {
	Args           []string
	Stdout, Stderr string
	Code           int
}

func (r Result) String() string {
	return fmt.Sprintf("taskdeck %s\nexit %d\n--- stdout:\n%s--- stderr:\n%s", strings.Join(r.Args, " "), r.Code, r.Stdout, r.Stderr)
}

// Must fails the test unless the command exited with want.
func (r Result) Must(t *testing.T, want int) Result {
	t.Helper()
	if r.Code != want {
		t.Fatalf("want exit %d\n%s", want, r)
	}
	return r
}

// OneErrorLine checks a failed command's stderr: exactly one line, starting
// "taskdeck: ", with no panic or goroutine trace, containing each of want.
func OneErrorLine(t *testing.T, r Result, want ...string) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(r.Stderr, "\n"), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "taskdeck: ") || !strings.HasSuffix(r.Stderr, "\n") {
		t.Fatalf("want exactly one stderr line starting \"taskdeck: \"\n%s", r)
	}
	for _, bad := range []string{"panic", "goroutine ", "runtime."} {
		if strings.Contains(r.Stderr+r.Stdout, bad) {
			t.Fatalf("output contains %q\n%s", bad, r)
		}
	}
	for _, w := range want {
		if !strings.Contains(lines[0], w) {
			t.Fatalf("stderr should mention %q\n%s", w, r)
		}
	}
}

// OnlyID checks that stdout is exactly one local task id and returns it.
func OnlyID(t *testing.T, r Result) string {
	t.Helper()
	id := strings.TrimSpace(r.Stdout)
	if id == "" || strings.ContainsAny(id, " \n\t") {
		t.Fatalf("want one task id on stdout\n%s", r)
	}
	return id
}

// Missing reports which of want are missing from s.
func Missing(s string, want ...string) []string {
	var out []string
	for _, w := range want {
		if !strings.Contains(s, w) {
			out = append(out, w)
		}
	}
	return out
}

// MustContain fails the test unless in (some output of r) has each of want.
func MustContain(t *testing.T, r Result, in string, want ...string) {
	t.Helper()
	if m := Missing(in, want...); len(m) > 0 {
		t.Fatalf("output lacks %q\n%s", m, r)
	}
}

// WaitFor polls cond until it holds, failing the test after WaitTimeout.
func WaitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	WaitForAfter(t, 0, what, cond)
}

// WaitForAfter is WaitFor for a condition that cannot hold before about
// run has passed (a task still running): its deadline is run longer.
func WaitForAfter(t *testing.T, run time.Duration, what string, cond func() bool) {
	t.Helper()
	waitfor.Within(t, run+waitBase, what, cond) // Within scales it
}

// ClosedPort returns a loopback address nothing listens on.
func ClosedPort(t *testing.T) string {
	t.Helper()
	port, err := testproc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

// SyncBuf is an io.Writer that may be read while a process writes to it.
type SyncBuf struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *SyncBuf) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
