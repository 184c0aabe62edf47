// Package e2e holds black-box tests of the taskdeck command line.
// TestMain builds the real binary once; every test runs it as
// subprocesses with its own data directory, config file and XDG
// directories, against real demo servers (`taskdeck demo-server`) on
// loopback. Every process a test starts is killed and reaped in
// t.Cleanup.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/internal/clitest"
	"github.com/taskdeck/taskdeck/internal/pgtest"
	"github.com/taskdeck/taskdeck/internal/testproc"
)

// tdBin is the taskdeck binary built by TestMain.
var tdBin string

// The exit codes the README documents: what a script branches on.
const (
	exitOK          = 0
	exitTaskBad     = 1
	exitUsage       = 2
	exitUnreachable = 3
	exitStoreLocked = 4
	exitWaiting     = 5
	exitLocal       = 6
	exitTimedOut    = 7
	exitInterrupted = 130
)

// stopGrace is how long the README says taskdeck takes at most to exit
// after a signal.
const stopGrace = 5 * time.Second

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "taskdeck-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	tdBin = filepath.Join(dir, "taskdeck")
	build := exec.Command("go", "build", "-o", tdBin, "..")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building taskdeck:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := pgtest.Run(m) // a PostgreSQL only for the tests that ask for one
	os.RemoveAll(dir)
	os.Exit(code)
}

// demoSpeed makes demo tools run 20 times faster than their arguments say.
const demoSpeed = "0.05"

// env is a private environment for taskdeck processes: HOME and the XDG
// directories point into a temporary directory.
func testEnv(t *testing.T) []string {
	t.Helper()
	home := t.TempDir()
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME", "XDG_RUNTIME_DIR":
			continue
		}
		env = append(env, kv)
	}
	return append(env,
		"HOME="+home,
		"XDG_CONFIG_HOME="+filepath.Join(home, "config"),
		"XDG_DATA_HOME="+filepath.Join(home, "data"),
		"XDG_CACHE_HOME="+filepath.Join(home, "cache"),
		"XDG_STATE_HOME="+filepath.Join(home, "state"),
	)
}

// deck is one user's taskdeck: a data directory and a config file.
type deck struct {
	t       *testing.T
	dataDir string
	config  string
	env     []string
}

func newDeck(t *testing.T) *deck {
	t.Helper()
	dir := t.TempDir()
	d := &deck{t: t, dataDir: filepath.Join(dir, "data"), config: filepath.Join(dir, "config.json"), env: testEnv(t)}
	d.writeConfig("{}\n") // --config names a file, so it must exist
	return d
}

// writeConfig writes the deck's config file.
func (d *deck) writeConfig(content string) {
	d.t.Helper()
	if err := os.WriteFile(d.config, []byte(content), 0o600); err != nil {
		d.t.Fatal(err)
	}
}

func (d *deck) args(args []string) []string {
	return append([]string{"--data-dir", d.dataDir, "--config", d.config}, args...)
}

// run runs taskdeck to its end with the deck's flags.
func (d *deck) run(args ...string) clitest.Result {
	d.t.Helper()
	return runTD(d.t, d.env, d.args(args)...)
}

// runTD runs the binary with exactly these arguments.
func runTD(t *testing.T, env []string, args ...string) clitest.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), clitest.CmdTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, tdBin, args...)
	cmd.Env = env
	testproc.Group(cmd)
	cmd.Cancel = testproc.Kill(cmd) // a timeout kills what it started too
	cmd.Stdin = nil                 // not a terminal: taskdeck never prompts
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	res := clitest.Result{Args: args, Stdout: stdout.String(), Stderr: stderr.String()}
	if ctx.Err() != nil {
		t.Fatalf("taskdeck %s did not finish within %s\n%s", strings.Join(args, " "), clitest.CmdTimeout, res)
	}
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("taskdeck %s: %v", strings.Join(args, " "), err)
		}
		res.Code = ee.ExitCode()
	}
	return res
}

// proc is a taskdeck process running in the background.
type proc struct {
	cmd            *exec.Cmd
	Stdout, Stderr *clitest.SyncBuf
	done           chan struct{}
	Code           int
}

// startTD starts the binary in the background; t.Cleanup kills and reaps it.
func startTD(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	return startTDWithStdin(t, env, nil, args...)
}

// startTDWithStdin is startTD with the process reading stdin (nil: none).
func startTDWithStdin(t *testing.T, env []string, stdin io.Reader, args ...string) *proc {
	t.Helper()
	p := &proc{Stdout: &clitest.SyncBuf{}, Stderr: &clitest.SyncBuf{}, done: make(chan struct{})}
	p.cmd = exec.Command(tdBin, args...)
	p.cmd.Env = env
	// A run that times out ends in a panic that runs no cleanup: the
	// kernel kills the child then; the cleanup kills its whole group
	// (its stdio servers, its notify commands' groups aside).
	testproc.Group(p.cmd)
	p.cmd.Stdin = stdin
	p.cmd.Stdout, p.cmd.Stderr = p.Stdout, p.Stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.cmd.Wait()
		p.Code = p.cmd.ProcessState.ExitCode()
		close(p.done)
	}()
	t.Cleanup(p.kill)
	return p
}

func (d *deck) start(args ...string) *proc {
	d.t.Helper()
	return startTD(d.t, d.env, d.args(args)...)
}

// serveProxy starts `serve --proxy` on a free loopback port and returns it
// with the proxy's base URL (http://127.0.0.1:PORT), as it printed it.
func (d *deck) serveProxy() (*proc, string) {
	d.t.Helper()
	return d.serveProxyAt("127.0.0.1:0")
}

// serveProxyAt is serveProxy on addr.
func (d *deck) serveProxyAt(listen string) (*proc, string) {
	d.t.Helper()
	owner := d.start("serve", "--proxy", listen)
	addr := regexp.MustCompile(`agents reach server NAME at (http://127\.0\.0\.1:\d+)/mcp/NAME`)
	clitest.WaitFor(d.t, "the proxy's address", func() bool { return addr.MatchString(owner.Stderr.String()) || owner.exited() })
	m := addr.FindStringSubmatch(owner.Stderr.String())
	if m == nil {
		d.t.Fatalf("serve --proxy printed no address (exit %d): %s", owner.Code, owner.Stderr)
	}
	return owner, m[1]
}

// kill sends SIGKILL to the process's group and waits until the process
// is reaped.
func (p *proc) kill() {
	testproc.Signal(p.cmd, syscall.SIGKILL) // an error means the group has already ended
	select {
	case <-p.done:
	case <-time.After(clitest.WaitTimeout):
		panic(fmt.Sprintf("process %d did not die after SIGKILL", p.cmd.Process.Pid))
	}
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// demoServer is a running `taskdeck demo-server` on loopback.
type demoServer struct {
	url  string // http://127.0.0.1:PORT/mcp
	addr string // 127.0.0.1:PORT
	p    *proc
}

// startDemo starts a demo server on addr ("127.0.0.1:0" for any port),
// with extra flags (e.g. --hostile).
func startDemo(t *testing.T, addr string, extra ...string) *demoServer {
	t.Helper()
	var p *proc
	var url string
	// A port just freed by a killed server may be briefly refused; retry.
	for attempt := 0; ; attempt++ {
		p = startTD(t, testEnv(t), append([]string{"demo-server", "--addr", addr, "--speed", demoSpeed}, extra...)...)
		clitest.WaitFor(t, "the demo server's URL", func() bool {
			return strings.Contains(p.Stdout.String(), "\n") || p.exited()
		})
		if line, _, ok := strings.Cut(p.Stdout.String(), "\n"); ok {
			url = line
			break
		}
		if attempt >= 20 {
			t.Fatalf("demo-server --addr %s did not start: exit %d, stderr %q", addr, p.Code, p.Stderr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !strings.HasPrefix(url, "http://127.0.0.1:") || !strings.HasSuffix(url, "/mcp") {
		t.Fatalf("demo-server printed %q as its URL", url)
	}
	return &demoServer{url: url, addr: strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/mcp"), p: p}
}

// demoStats mirrors demo.Stats as served on GET /stats.
type demoStats struct {
	ToolCalls    map[string]int
	TasksCreated int
	TaskIDs      []string
	Gets         int
	Updates      int
	Cancels      int
}

func (s *demoServer) stats(t *testing.T) demoStats {
	t.Helper()
	resp, err := http.Get("http://" + s.addr + "/stats")
	if err != nil {
		t.Fatalf("GET /stats: %v", err)
	}
	defer resp.Body.Close()
	var st demoStats
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatalf("GET /stats: %v", err)
	}
	return st
}

// task is the --json shape of a task, as a script reads it.
type task struct {
	ID            string                     `json:"id"`
	TaskID        string                     `json:"taskId"`
	Server        string                     `json:"server"`
	Tool          string                     `json:"tool"`
	Key           string                     `json:"key"`
	Status        string                     `json:"status"`
	StatusMessage string                     `json:"statusMessage"`
	CreatedAt     time.Time                  `json:"createdAt"`
	UpdatedAt     time.Time                  `json:"updatedAt"`
	InputRequests map[string]json.RawMessage `json:"inputRequests"`
	AnsweredKeys  []string                   `json:"answeredKeys"`
	Result        *struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	} `json:"result"`
	IsError bool `json:"isError"`
	Error   *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	LocalError string `json:"localError"`
	raw        map[string]json.RawMessage
}

func (tk task) resultText() string {
	if tk.Result == nil {
		return ""
	}
	var parts []string
	for _, c := range tk.Result.Content {
		parts = append(parts, c.Text)
	}
	return strings.Join(parts, "\n")
}

func parseTask(t *testing.T, line string) task {
	t.Helper()
	var tk task
	if err := json.Unmarshal([]byte(line), &tk); err != nil {
		t.Fatalf("not a JSON task: %v\n%s", err, line)
	}
	if err := json.Unmarshal([]byte(line), &tk.raw); err != nil {
		t.Fatalf("not a JSON object: %v\n%s", err, line)
	}
	return tk
}

// getJSON runs `get ID --json` and parses it.
func (d *deck) getJSON(id string) task {
	d.t.Helper()
	r := d.run("get", id, "--json").Must(d.t, 0)
	return parseTask(d.t, strings.TrimSpace(r.Stdout))
}

// ls runs `ls --json`: one task per line.
func (d *deck) ls() []task {
	d.t.Helper()
	r := d.run("ls", "--json").Must(d.t, 0)
	var tasks []task
	sc := bufio.NewScanner(strings.NewReader(r.Stdout))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if line := sc.Text(); line != "" {
			tasks = append(tasks, parseTask(d.t, line))
		}
	}
	return tasks
}

func (d *deck) lsByID() map[string]task {
	m := map[string]task{}
	for _, tk := range d.ls() {
		m[tk.ID] = tk
	}
	return m
}

// waitStatus polls `get ID --json` (which refreshes from the server)
// until the task has the status.
func (d *deck) waitStatus(id, status string) task {
	d.t.Helper()
	return d.waitStatusAfter(id, status, 0)
}

// waitStatusAfter is waitStatus for a task that has about run still to go
// before it can reach status: the usual wait, on top of that run.
func (d *deck) waitStatusAfter(id, status string, run time.Duration) task {
	d.t.Helper()
	var last task
	clitest.WaitForAfter(d.t, run, fmt.Sprintf("task %s to be %s", id, status), func() bool {
		last = d.getJSON(id)
		return last.Status == status
	})
	return last
}
