package e2e

import (
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/internal/clitest"
)

// TestCommandsDuringOwnerKill: 30 `ls` started as the `serve` owner is
// SIGKILLed, 20 times over. The short commands own the store in turn and
// hand over; none is told the store is in use by another taskdeck
// (exit 4), and every one lists the records.
func TestCommandsDuringOwnerKill(t *testing.T) {
	t.Parallel()
	runs, clients := 20, 30
	if testing.Short() {
		runs = 3
	}
	srv := startDemo(t, "127.0.0.1:0")
	d := newDeck(t)
	d.writeConfig(fmt.Sprintf(`{"mcpServers":{"build":{"url":%q}}}`, srv.url))
	d.run("call", "--server", "build", "sleep", "--args", `{"seconds":1}`).Must(t, exitOK)
	codes := map[int]int{}
	var slowest time.Duration
	for run := range runs {
		owner := d.serve()
		var wg sync.WaitGroup
		results := make([]clitest.Result, clients)
		took := make([]time.Duration, clients)
		for i := range clients {
			wg.Go(func() {
				start := time.Now()
				results[i] = d.run("ls")
				took[i] = time.Since(start)
			})
			if i == clients/3 {
				owner.cmd.Process.Signal(syscall.SIGKILL)
			}
		}
		wg.Wait()
		<-owner.done
		for i, r := range results {
			codes[r.Code]++
			slowest = max(slowest, took[i])
			if r.Code != exitOK {
				t.Errorf("run %d, ls %d:\n%s", run, i, r)
			} else if !strings.Contains(r.Stdout, "sleep") {
				t.Errorf("run %d, ls %d lists no record:\n%s", run, i, r)
			}
		}
	}
	t.Logf("%d runs of %d ls around an owner's SIGKILL: exit codes %v; slowest %v", runs, clients, codes, slowest.Round(time.Millisecond))
}
