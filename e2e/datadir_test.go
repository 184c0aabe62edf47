//go:build unix

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/internal/clitest"
	"github.com/taskdeck/taskdeck/internal/waitfor"
)

// TestSIGTERMWhileConfigIsAFIFO: a config path that is a FIFO nobody
// writes does not hold the process: it is refused as not a regular file,
// and SIGTERM stops the real binary within a bound either way.
func TestSIGTERMWhileConfigIsAFIFO(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "config.json")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	p := startTD(t, testEnv(t), "--data-dir", filepath.Join(dir, "data"), "--config", fifo, "servers")
	// Wait until the process has exited or has the FIFO open for reading
	// (only then does a non-blocking open for writing succeed). The
	// writer is kept open and never writes: a FIFO nobody writes.
	var w *os.File
	clitest.WaitFor(t, "taskdeck to open the FIFO or exit", func() bool {
		if p.exited() {
			return true
		}
		f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0)
		if err != nil {
			return false
		}
		w = f
		return true
	})
	if w != nil {
		defer w.Close()
	}
	p.cmd.Process.Signal(syscall.SIGTERM) // an error means it has already ended
	select {
	case <-p.done:
	case <-time.After(waitfor.Scale(5 * time.Second)): // the README's promise: out within 5 s of a signal
		t.Fatalf("taskdeck was still running %v after SIGTERM (config is a FIFO)\nstderr: %s", waitfor.Scale(5*time.Second), p.Stderr.String())
	}
	r := clitest.Result{Args: p.cmd.Args, Stdout: p.Stdout.String(), Stderr: p.Stderr.String(), Code: p.Code}
	r.Must(t, exitUsage)
	clitest.OneErrorLine(t, r, fifo, "not a regular file")
	if strings.Contains(r.Stdout, "no servers") {
		t.Fatalf("a FIFO was read as a config\n%s", r)
	}
}
