package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
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
