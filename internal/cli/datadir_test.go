//go:build unix

package cli

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/taskdeck/taskdeck/internal/clitest"
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
	r := c.run("ls").Must(t, exitLocal)
	clitest.OneErrorLine(t, r, "taskdeck.log", "not a regular file")
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
	r = fifo.run("ls").Must(t, exitLocal)
	clitest.OneErrorLine(t, r, "taskdeck.log", "not a regular file")
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
	r := c.run("ls").Must(t, exitLocal)
	clitest.OneErrorLine(t, r, c.dataDir, "belongs to uid 65534", "--data-dir")
	if _, err := os.Lstat(filepath.Join(c.dataDir, "taskdeck.log")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the log was opened in another user's directory (%v)", err)
	}
}
