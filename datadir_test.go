//go:build unix

package main

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestPlantedLogSymlinkIsRefused: a taskdeck.log planted in the data
// directory as a symlink is never followed (it could point at any file
// the operator may write); the command stops in one line, exit 6, and
// the link's target is not created.
func TestPlantedLogSymlinkIsRefused(t *testing.T) {
	t.Parallel()
	c := newInproc(t)
	if err := os.MkdirAll(c.dataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.Symlink(victim, filepath.Join(c.dataDir, "taskdeck.log")); err != nil {
		t.Fatal(err)
	}
	r := c.run("ls").must(t, exitLocal)
	oneErrorLine(t, r, "taskdeck.log", "not a regular file")
	if _, err := os.Lstat(victim); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the symlink was followed: %s exists (%v)", victim, err)
	}

	// A FIFO in its place would hold the open: refused the same way.
	fifo := newInproc(t)
	if err := os.MkdirAll(fifo.dataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(fifo.dataDir, "taskdeck.log"), 0o600); err != nil {
		t.Fatal(err)
	}
	r = fifo.run("ls").must(t, exitLocal)
	oneErrorLine(t, r, "taskdeck.log", "not a regular file")
}

// TestDataDirOfAnotherUserIsRefused: a data directory that belongs to
// someone else (who could plant files in it) is refused before anything
// is opened in it.
func TestDataDirOfAnotherUserIsRefused(t *testing.T) {
	t.Parallel()
	c := newInproc(t)
	if err := os.MkdirAll(c.dataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(c.dataDir, 65534, 65534); err != nil {
		t.Skipf("cannot give the directory to another user: %v", err)
	}
	r := c.run("ls").must(t, exitLocal)
	oneErrorLine(t, r, c.dataDir, "belongs to uid 65534", "--data-dir")
	if _, err := os.Lstat(filepath.Join(c.dataDir, "taskdeck.log")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the log was opened in another user's directory (%v)", err)
	}
}

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
	waitFor(t, "taskdeck to open the FIFO or exit", func() bool {
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
	case <-time.After(3 * time.Second):
		t.Fatalf("taskdeck was still running 3 s after SIGTERM (config is a FIFO)\nstderr: %s", p.stderr.String())
	}
	r := result{args: p.cmd.Args, stdout: p.stdout.String(), stderr: p.stderr.String(), code: p.code}
	r.must(t, exitUsage)
	oneErrorLine(t, r, fifo, "not a regular file")
	if strings.Contains(r.stdout, "no servers") {
		t.Fatalf("a FIFO was read as a config\n%s", r)
	}
}
