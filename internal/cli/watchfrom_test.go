package cli

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/deck/decktest"
	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/internal/clitest"
	"github.com/taskdeck/taskdeck/internal/hostile"
	"github.com/taskdeck/taskdeck/internal/waitfor"
	"github.com/taskdeck/taskdeck/model"
)

// runOn runs one command line on a deck of the test's (nothing is opened
// from the data directory).
func (c *inproc) runOn(d deck.Deck, args ...string) clitest.Result {
	c.t.Helper()
	var stdout, stderr clitest.SyncBuf
	f := c.factory(&stdout, &stderr)
	f.dataDir, f.configPath = c.dataDir, c.config
	if err := f.openLog(); err != nil {
		c.t.Fatal(err)
	}
	f.dk = d
	args = append([]string{"--data-dir", c.dataDir, "--config", c.config}, args...)
	ctx, cancel := context.WithTimeout(context.Background(), clitest.CmdTimeout)
	defer cancel()
	code := f.Execute(ctx, args)
	return clitest.Result{Args: args, Stdout: stdout.String(), Stderr: stderr.String(), Code: code}
}

// TestFollowingOneTaskWatchesFromItsRevision: `call --wait` follows
// its task from the revision of its record, so the feed replays
// what changed after it instead of a snapshot of every record in the
// store (Watch(0)), and it still sees the task to its end.
func TestFollowingOneTaskWatchesFromItsRevision(t *testing.T) {
	t.Parallel()
	c := newInproc(t)
	d := decktest.New(nil)
	d.Script("echo", decktest.Outcome{Status: model.StatusCompleted})
	for range 3 { // records the snapshot would carry
		if _, err := d.Call(t.Context(), deck.CallRequest{Server: model.ServerRef{Name: "demo"}, Tool: "echo"}); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan clitest.Result, 1)
	go func() {
		done <- c.runOn(d, "call", "--url", "http://127.0.0.1:1/mcp", "sleep", "--args", `{"seconds":2}`, "--wait")
	}()
	waitfor.Within(t, 20*time.Second, "call --wait to watch its task", func() bool { return len(d.Watches()) == 1 })
	sleeps, err := d.List(t.Context(), deck.Filter{Tool: "sleep"})
	if err != nil || len(sleeps) != 1 {
		t.Fatalf("the call left %d records (%v)", len(sleeps), err)
	}
	end := sleeps[0].Task.Clone()
	end.Status = model.StatusCompleted
	d.Put(end)
	r := (<-done).Must(t, exitOK)
	if !strings.Contains(r.Stdout, "completed") {
		t.Fatalf("call --wait did not follow the task to its end\n%s", r)
	}
	if w := d.Watches(); !slices.Equal(w, []uint64{sleeps[0].Task.Revision}) || w[0] == 0 {
		t.Fatalf("call --wait watched from %v, want once from its record's revision %d (not 0, a snapshot)", w, sleeps[0].Task.Revision)
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
	r := c.run("get", id).Must(t, exitOK)
	if !strings.Contains(r.Stdout, id) {
		t.Fatalf("get does not show the task\n%s", r)
	}
	if n := len(srv.Requests("tasks/get")) - before; n != 1 {
		t.Fatalf("get sent %d tasks/get with 4 tasks open, want 1 (its own)", n)
	}
	d := decktest.New(nil)
	res, err := d.Call(t.Context(), deck.CallRequest{Server: model.ServerRef{Name: "demo"}, Tool: "sleep"})
	if err != nil {
		t.Fatal(err)
	}
	c.runOn(d, "get", res.Task.ID).Must(t, exitOK)
	if w := d.Watches(); len(w) != 0 {
		t.Fatalf("get watched the feed from %v; a refresh needs no watch", w)
	}
}
