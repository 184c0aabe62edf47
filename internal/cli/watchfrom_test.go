package cli

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/internal/clitest"
	"github.com/taskdeck/taskdeck/internal/hostile"
)

// watchLog is the real engine, with the revision each Watch started from
// written down.
type watchLog struct {
	deck.Deck
	mu    sync.Mutex
	froms []uint64
}

func (w *watchLog) Watch(ctx context.Context, from uint64) (deck.Feed, error) {
	w.mu.Lock()
	w.froms = append(w.froms, from)
	w.mu.Unlock()
	return w.Deck.Watch(ctx, from)
}

// runOnEngine runs one command line on the engine opened in this
// process, and returns the revisions its watches started from.
func (c *inproc) runOnEngine(args ...string) (clitest.Result, []uint64) {
	c.t.Helper()
	var stdout, stderr clitest.SyncBuf
	f := c.factory(&stdout, &stderr)
	f.dataDir, f.configPath = c.dataDir, c.config
	cfg, err := f.config()
	if err != nil {
		c.t.Fatal(err)
	}
	if err := f.openLog(); err != nil {
		c.t.Fatal(err)
	}
	e, err := f.openEngine(cfg, false)
	if err != nil {
		c.t.Fatal(err)
	}
	w := &watchLog{Deck: e}
	f.dk = w
	args = append([]string{"--data-dir", c.dataDir, "--config", c.config}, args...)
	ctx, cancel := context.WithTimeout(context.Background(), clitest.CmdTimeout)
	defer cancel()
	code := f.Execute(ctx, args)
	w.mu.Lock()
	defer w.mu.Unlock()
	return clitest.Result{Args: args, Stdout: stdout.String(), Stderr: stderr.String(), Code: code}, slices.Clone(w.froms)
}

// TestFollowingOneTaskWatchesFromItsRevision: `call --wait` follows
// its task from the revision of its record, so the feed replays
// what changed after it instead of a snapshot of every record in the
// store (Watch(0)), and it still sees the task to its end.
func TestFollowingOneTaskWatchesFromItsRevision(t *testing.T) {
	t.Parallel()
	c := newInproc(t)
	url := demoURL(t)
	for range 3 { // records the snapshot would carry
		clitest.OnlyID(t, c.run("call", "--url", url, "echo", "--args", `{"text":"before"}`).Must(t, exitOK))
	}
	r, froms := c.runOnEngine("call", "--url", url, "sleep", "--args", `{"seconds":2}`, "--wait")
	r.Must(t, exitOK)
	if !strings.Contains(r.Stdout, "completed") {
		t.Fatalf("call --wait did not follow the task to its end\n%s", r)
	}
	if len(froms) != 1 || froms[0] == 0 {
		t.Fatalf("call --wait watched from %v, want once from its record's revision (not 0, a snapshot)", froms)
	}

}

// TestGetPollsOnlyItsTask: `get` refreshes its one open task with one
// tasks/get and watches nothing: the other open tasks of the store cost
// the server nothing.
func TestGetPollsOnlyItsTask(t *testing.T) {
	t.Parallel()
	c := newInproc(t)
	srv := hostile.Start(t, demo.Options{Speed: 0.05, PollInterval: time.Hour})
	var id string
	for range 4 {
		id = clitest.OnlyID(t, c.run("call", "--url", srv.URL, "sleep", "--args", `{"seconds":600}`).Must(t, exitOK))
	}
	before := len(srv.Requests("tasks/get"))
	r, froms := c.runOnEngine("get", id)
	r.Must(t, exitOK)
	if !strings.Contains(r.Stdout, id) {
		t.Fatalf("get does not show the task\n%s", r)
	}
	if n := len(srv.Requests("tasks/get")) - before; n != 1 {
		t.Fatalf("get sent %d tasks/get with 4 tasks open, want 1 (its own)", n)
	}
	if len(froms) != 0 {
		t.Fatalf("get watched the feed from %v; a refresh needs no watch", froms)
	}
}
