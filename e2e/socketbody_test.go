package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// vmHWM is a process's peak resident set, in bytes.
func vmHWM(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmHWM")
	return 0
}

// TestOwnerBodiesBounded: 16 clients each send the owner a 15 MiB request
// at once, and one sends 60 MiB. The oversized one is refused in one line
// naming the bound; the owner's peak memory grows by a bounded amount
// (bodies are read and decoded 64 MiB at a time), not by all of them.
func TestOwnerBodiesBounded(t *testing.T) {
	t.Parallel()
	d := newDeck(t)
	owner := d.serve()
	base := vmHWM(t, owner.cmd.Process.Pid)
	sock := filepath.Join(d.dataDir, "taskdeck.sock")
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	post := func(size int) (int, string) {
		body := `{"id":"` + strings.Repeat("a", size) + `"}`
		resp, err := c.Post("http://taskdeck/v1/get", "application/json", strings.NewReader(body))
		if err != nil {
			t.Error(err)
			return 0, ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, msg := post(60 << 20); code != http.StatusBadRequest || !strings.Contains(msg, "over 16 MiB") {
		t.Fatalf("a 60 MiB request: %d %s, want refused naming the bound", code, msg)
	}
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() { post(15 << 20) })
	}
	wg.Wait()
	grew := vmHWM(t, owner.cmd.Process.Pid) - base
	t.Logf("owner peak RSS %d MiB, +%d MiB over 16 concurrent 15 MiB requests", (base+grew)>>20, grew>>20)
	if grew > 400<<20 {
		t.Fatalf("the owner's peak memory grew by %d MiB, want within 400 MiB", grew>>20)
	}
}
