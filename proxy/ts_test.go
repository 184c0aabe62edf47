package proxy

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/model"
)

// agentDir installs the TypeScript test agent (testdata/agent, its
// versions pinned by package-lock.json) with `npm ci` into a cache
// directory named by the lock file's hash, once. Without node or npm the
// test is skipped, except under CI=true, where it fails.
func agentDir(t *testing.T) string {
	t.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s is not installed; CI must run the TypeScript client's tests", tool)
			}
			t.Skipf("%s is not installed: the TypeScript client's tests are skipped (install Node.js 20 or newer to run them)", tool)
		}
	}
	src := filepath.Join("testdata", "agent")
	lock, err := os.ReadFile(filepath.Join(src, "package-lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	agent, err := os.ReadFile(filepath.Join(src, "agent.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(lock)
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "taskdeck-proxy-agent-"+hex.EncodeToString(sum[:8]))
	if _, err := os.Stat(filepath.Join(dir, "node_modules")); err != nil {
		tmp, err := os.MkdirTemp(cache, "taskdeck-proxy-agent-*")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(tmp)
		for _, f := range []string{"package.json", "package-lock.json"} {
			b, err := os.ReadFile(filepath.Join(src, f))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(tmp, f), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund", "--ignore-scripts")
		cmd.Dir = tmp
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm ci: %v\n%s", err, out)
		}
		os.RemoveAll(dir)
		if err := os.Rename(tmp, dir); err != nil && !os.IsExist(err) {
			t.Fatal(err)
		}
	}
	// The agent itself is the worktree's, whatever the cache holds.
	if err := os.WriteFile(filepath.Join(dir, "agent.mjs"), agent, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// startAgent runs the agent; it is killed by its pid when the test ends.
func startAgent(t *testing.T, dir string, args ...string) (*exec.Cmd, *bufio.Scanner) {
	t.Helper()
	cmd := exec.Command("node", append([]string{"agent.mjs"}, args...)...)
	cmd.Dir = dir
	cmd.Stderr = &testWriter{t}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	return cmd, bufio.NewScanner(stdout)
}

type testWriter struct{ t *testing.T }

func (w *testWriter) Write(p []byte) (int, error) {
	w.t.Logf("agent: %s", strings.TrimSpace(string(p)))
	return len(p), nil
}

// The official TypeScript client, with the official tasks requester,
// through the proxy: every demo tool completes (an input request inside a
// task answered by tasks/update, one before the task answered by an MRTR
// retry), a cancel ends in cancelled, and every record names the agent.
func TestTypeScriptClientTaskFlows(t *testing.T) {
	dir := agentDir(t)
	r := startRig(t, demo.Options{}, Options{})
	cmd, lines := startAgent(t, dir, r.url, "flows")
	var got []string
	for lines.Scan() {
		got = append(got, lines.Text())
		t.Log(lines.Text())
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the agent failed (%v): %s", err, strings.Join(got, "\n"))
	}
	out := strings.Join(got, "\n")
	for _, want := range []string{`"tool":"sleep","kind":"task"`, `"tool":"approve","kind":"task"`, `"tool":"confirm_first","kind":"task"`, `"cancelled":true`, `"tool":"echo","kind":"immediate"`} {
		if !strings.Contains(out, want) {
			t.Errorf("the agent's output lacks %s", want)
		}
	}
	list, err := r.eng.List(context.Background(), deck.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 6 {
		t.Fatalf("%d records for the agent's 6 calls", len(list))
	}
	for _, e := range list {
		if e.Task.Agent != "ts-agent" {
			t.Errorf("record %s (%s) names agent %q", e.Task.ID, e.Task.Tool, e.Task.Agent)
		}
		if e.Task.Tool != "echo" && !strings.Contains(out, `"taskId":"`+e.Task.ID+`"`) {
			t.Errorf("the agent never saw record %s (%s) as its task id", e.Task.ID, e.Task.Tool)
		}
	}
}

// The agent killed with SIGKILL while its held call runs: the task is
// followed to its end and its result kept.
func TestTypeScriptAgentKilledMidHold(t *testing.T) {
	dir := agentDir(t)
	r := startRig(t, demo.Options{Speed: 1}, Options{})
	cmd, _ := startAgent(t, dir, r.url, "hold", "sleep", `{"seconds":2}`)
	rec := only(t, r.eng)
	until(t, "the task handle", func() bool {
		e, err := r.eng.Get(context.Background(), rec.ID)
		return err == nil && e.Task.TaskID != ""
	})
	if err := syscall.Kill(cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if e, _ := r.eng.Get(context.Background(), rec.ID); e.Task.Status != model.StatusWorking {
		t.Fatalf("the task is %s when the agent dies, want working (the test must kill it mid-task)", e.Task.Status)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		e, err := r.eng.Get(context.Background(), rec.ID)
		if err == nil && e.Task.Status == model.StatusCompleted && strings.Contains(string(e.Task.Result), "slept") {
			if e.Task.Agent != "ts-agent" {
				t.Fatalf("record names agent %q", e.Task.Agent)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the agent died the task stayed %s", e.Task.Status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
