//go:build unix

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/internal/clitest"
)

// TestSIGTERMStopsAStuckCommand: whatever a command waits on, SIGTERM
// stops the real binary within a bound. Here a stdio server that never
// answers and ignores SIGTERM itself holds the call, and then the close.
func TestSIGTERMStopsAStuckCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "server.pid")
	script := fmt.Sprintf("echo $$ > %s; trap '' TERM INT; exec sleep 600", pidFile)
	config := filepath.Join(dir, "config.json")
	if err := os.WriteFile(config, fmt.Appendf(nil, `{"mcpServers":{"stuck":{"command":"sh","args":["-c",%q]}}}`, script), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // the server ignores SIGTERM, and may outlive taskdeck
		if b, err := os.ReadFile(pidFile); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	p := startTD(t, testEnv(t), "--data-dir", filepath.Join(dir, "data"), "--config", config,
		"call", "--server", "stuck", "echo", "--args", `{"text":"x"}`)
	clitest.WaitFor(t, "the stdio server to start", func() bool {
		b, err := os.ReadFile(pidFile)
		return err == nil && strings.HasSuffix(string(b), "\n") || p.exited()
	})
	p.cmd.Process.Signal(syscall.SIGTERM)
	bound := stopGrace + 3*time.Second
	select {
	case <-p.done:
	case <-time.After(bound):
		t.Fatalf("taskdeck was still running %s after SIGTERM\nstderr: %s", bound, p.Stderr.String())
	}
	if p.Code != exitInterrupted {
		t.Fatalf("exit %d after SIGTERM, want %d\nstderr: %s", p.Code, exitInterrupted, p.Stderr.String())
	}
	// taskdeck took its server down with it: closed its stdin, then SIGTERM
	// (ignored here), then SIGKILL.
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	clitest.WaitFor(t, "the stdio server to be gone", func() bool { return !alive(pid) })
}

// alive reports a process that exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return syscall.Kill(pid, 0) == nil
	}
	// The state follows the command name in parentheses.
	fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}
