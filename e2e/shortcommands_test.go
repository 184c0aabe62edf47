package e2e

// Many short commands on one store, as scripts and shell loops run them.

import (
	"bytes"
	"context"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/internal/clitest"
	"github.com/taskdeck/taskdeck/internal/testproc"
)

// TestShortCommandsUnderLowFileLimit runs 200 writing commands in a row,
// each under `ulimit -n 64`. Each short process used to leave one more
// table that nothing compacted and that every later open held open: past
// ~40 of them every command failed with "too many open files" here (past
// ~1,050 under the common limit of 1024).
func TestShortCommandsUnderLowFileLimit(t *testing.T) {
	t.Parallel()
	d := newDeck(t)
	srv := startDemo(t, "127.0.0.1:0")
	commands := 200
	if testing.Short() {
		commands = 60
	}
	// The first and the last ten, summed: one alone is mostly noise.
	var first, last time.Duration
	for i := range commands {
		start := time.Now()
		r := runLimited(t, d.env, 64, d.args([]string{"call", "--url", srv.url, "echo", "--args", `{"text":"short"}`})...)
		took := time.Since(start)
		if i < 10 {
			first += took
		}
		if i >= commands-10 {
			last += took
		}
		if r.Code != 0 {
			t.Fatalf("command %d of %d:\n%s", i+1, commands, r)
		}
	}
	tables := storeFiles(t, d.dataDir, ".sst")
	if len(tables) > 10 {
		t.Fatalf("%d table files after %d commands", len(tables), commands)
	}
	r := runLimited(t, d.env, 64, d.args([]string{"ls", "--json"})...)
	if r.Code != 0 || strings.Count(r.Stdout, "\n") != commands {
		t.Fatalf("after %d commands, want %d records\n%s", commands, commands, r)
	}
	t.Logf("%d commands under ulimit -n 64: %d table files; the first ten took %v, the last ten %v (%.1fx)",
		commands, len(tables), first, last, float64(last)/float64(first))
}

// runLimited runs the binary to its end with its open files limited to
// nofile (through the shell's ulimit, which applies to the child alone).
func runLimited(t *testing.T, env []string, nofile int, args ...string) clitest.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), clitest.CmdTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", append([]string{"-c", `ulimit -n "$0" && exec "$@"`, strconv.Itoa(nofile), tdBin}, args...)...)
	cmd.Env = env
	testproc.Group(cmd)
	cmd.Cancel = testproc.Kill(cmd)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	res := clitest.Result{Args: args, Stdout: stdout.String(), Stderr: stderr.String()}
	if ctx.Err() != nil {
		t.Fatalf("taskdeck %s did not finish within %s\n%s", strings.Join(args, " "), clitest.CmdTimeout, res)
	}
	if ee, ok := err.(*exec.ExitError); ok {
		res.Code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return res
}
