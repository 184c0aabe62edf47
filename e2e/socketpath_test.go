package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/taskdeck/taskdeck/internal/clitest"
)

// TestDeepDataDir: a data directory 200 bytes deep, far past what a unix
// socket path holds, works for every kind of command: one that owns the
// store (call, ls) and, while `serve` owns it, ones that go through its
// socket.
func TestDeepDataDir(t *testing.T) {
	t.Parallel()
	srv := startDemo(t, "127.0.0.1:0")
	d := newDeck(t)
	for len(d.dataDir) < 200 {
		d.dataDir = filepath.Join(d.dataDir, strings.Repeat("d", 40))
	}
	d.writeConfig(fmt.Sprintf(`{"mcpServers":{"build":{"url":%q}}}`, srv.url))
	id := strings.Fields(d.run("call", "--server", "build", "sleep", "--args", `{"seconds":1}`).Must(t, exitOK).Stdout)[0]
	if len(d.ls()) != 1 {
		t.Fatalf("ls in a %d-byte-deep data dir lists %d records, want 1", len(d.dataDir), len(d.ls()))
	}
	d.serve()
	d.run("call", "--server", "build", "sleep", "--args", `{"seconds":1}`).Must(t, exitOK)
	d.waitStatus(id, "completed")
	if n := len(d.ls()); n != 2 {
		t.Fatalf("ls through serve lists %d records, want 2", n)
	}
}

// TestSocketSymlinkNotFollowed: A's socket path is a symbolic link to B's
// live owner. A's commands refuse it in one line (exit 2); they neither
// list B's records nor make a call in B's store.
func TestSocketSymlinkNotFollowed(t *testing.T) {
	t.Parallel()
	srv := startDemo(t, "127.0.0.1:0")
	config := fmt.Sprintf(`{"mcpServers":{"build":{"url":%q}}}`, srv.url)
	b := newDeck(t)
	b.writeConfig(config)
	b.run("call", "--server", "build", "sleep", "--args", `{"seconds":1}`).Must(t, exitOK)
	b.serve()
	a := newDeck(t)
	a.writeConfig(config)
	if err := os.MkdirAll(a.dataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(b.dataDir, "taskdeck.sock"), filepath.Join(a.dataDir, "taskdeck.sock")); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"ls"}, {"call", "--server", "build", "sleep", "--args", `{"seconds":1}`}} {
		r := a.run(args...).Must(t, exitUsage)
		clitest.OneErrorLine(t, r, "is a symbolic link")
	}
	if n := len(b.ls()); n != 1 {
		t.Fatalf("B's store holds %d records, want its own 1", n)
	}
}
