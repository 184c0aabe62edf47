package main

// End-to-end tests of the taskdeck command line. TestMain builds the real
// binary once; every test runs it as subprocesses with its own data
// directory, config file and XDG directories, against real demo servers
// (`taskdeck demo-server`) on loopback. Every process a test starts is
// killed and reaped in t.Cleanup.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// tdBin is the taskdeck binary built by TestMain.
var tdBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "taskdeck-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	tdBin = filepath.Join(dir, "taskdeck")
	build := exec.Command("go", "build", "-o", tdBin, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building taskdeck:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// Generous deadlines: they bound a hang, they do not measure speed.
const (
	cmdTimeout  = 60 * time.Second
	waitTimeout = 20 * time.Second
)

// demoSpeed makes demo tools run 20 times faster than their arguments say.
const demoSpeed = "0.05"

// syncBuf is an io.Writer that may be read while a process writes to it.
type syncBuf struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuf) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

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

// result is what one finished command left behind.
type result struct {
	args           []string
	stdout, stderr string
	code           int
}

func (r result) String() string {
	return fmt.Sprintf("taskdeck %s\nexit %d\n--- stdout:\n%s--- stderr:\n%s", strings.Join(r.args, " "), r.code, r.stdout, r.stderr)
}

// run runs taskdeck to its end with the deck's flags.
func (d *deck) run(args ...string) result {
	d.t.Helper()
	return runTD(d.t, d.env, d.args(args)...)
}

// runTD runs the binary with exactly these arguments.
func runTD(t *testing.T, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, tdBin, args...)
	cmd.Env = env
	cmd.Stdin = nil // not a terminal: taskdeck never prompts
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	res := result{args: args, stdout: stdout.String(), stderr: stderr.String()}
	if ctx.Err() != nil {
		t.Fatalf("taskdeck %s did not finish within %s\n%s", strings.Join(args, " "), cmdTimeout, res)
	}
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("taskdeck %s: %v", strings.Join(args, " "), err)
		}
		res.code = ee.ExitCode()
	}
	return res
}

// must fails the test unless the command exited with want.
func (r result) must(t *testing.T, want int) result {
	t.Helper()
	if r.code != want {
		t.Fatalf("want exit %d\n%s", want, r)
	}
	return r
}

// proc is a taskdeck process running in the background.
type proc struct {
	cmd            *exec.Cmd
	stdout, stderr *syncBuf
	done           chan struct{}
	code           int
}

// startTD starts the binary in the background; t.Cleanup kills and reaps it.
func startTD(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{stdout: &syncBuf{}, stderr: &syncBuf{}, done: make(chan struct{})}
	p.cmd = exec.Command(tdBin, args...)
	p.cmd.Env = env
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.cmd.Wait()
		p.code = p.cmd.ProcessState.ExitCode()
		close(p.done)
	}()
	t.Cleanup(p.kill)
	return p
}

func (d *deck) start(args ...string) *proc {
	d.t.Helper()
	return startTD(d.t, d.env, d.args(args)...)
}

// kill sends SIGKILL and waits until the process is reaped.
func (p *proc) kill() {
	p.cmd.Process.Signal(syscall.SIGKILL) // an error means it has already ended
	select {
	case <-p.done:
	case <-time.After(waitTimeout):
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

// waitFor polls cond until it holds, failing the test after waitTimeout.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up after %s waiting for %s", waitTimeout, what)
		}
		time.Sleep(20 * time.Millisecond)
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
		waitFor(t, "the demo server's URL", func() bool {
			return strings.Contains(p.stdout.String(), "\n") || p.exited()
		})
		if line, _, ok := strings.Cut(p.stdout.String(), "\n"); ok {
			url = line
			break
		}
		if attempt >= 20 {
			t.Fatalf("demo-server --addr %s did not start: exit %d, stderr %q", addr, p.code, p.stderr.String())
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
	r := d.run("get", id, "--json").must(d.t, 0)
	return parseTask(d.t, strings.TrimSpace(r.stdout))
}

// ls runs `ls --json`: one task per line.
func (d *deck) ls() []task {
	d.t.Helper()
	r := d.run("ls", "--json").must(d.t, 0)
	var tasks []task
	sc := bufio.NewScanner(strings.NewReader(r.stdout))
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
	var last task
	waitFor(d.t, fmt.Sprintf("task %s to be %s", id, status), func() bool {
		last = d.getJSON(id)
		return last.Status == status
	})
	return last
}

// onlyID checks that stdout is exactly one local task id and returns it.
func onlyID(t *testing.T, r result) string {
	t.Helper()
	id := strings.TrimSpace(r.stdout)
	if id == "" || strings.ContainsAny(id, " \n\t") {
		t.Fatalf("want one task id on stdout\n%s", r)
	}
	return id
}

// oneErrorLine checks a failed command's stderr: exactly one line, starting
// "taskdeck: ", with no panic or goroutine trace, containing each of want.
func oneErrorLine(t *testing.T, r result, want ...string) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "taskdeck: ") || !strings.HasSuffix(r.stderr, "\n") {
		t.Fatalf("want exactly one stderr line starting \"taskdeck: \"\n%s", r)
	}
	for _, bad := range []string{"panic", "goroutine ", "runtime."} {
		if strings.Contains(r.stderr+r.stdout, bad) {
			t.Fatalf("output contains %q\n%s", bad, r)
		}
	}
	for _, w := range want {
		if !strings.Contains(lines[0], w) {
			t.Fatalf("stderr should mention %q\n%s", w, r)
		}
	}
}

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// containsAll reports which of want are missing from s.
func missing(s string, want ...string) []string {
	var out []string
	for _, w := range want {
		if !strings.Contains(s, w) {
			out = append(out, w)
		}
	}
	return out
}

func mustContain(t *testing.T, r result, in string, want ...string) {
	t.Helper()
	if m := missing(in, want...); len(m) > 0 {
		t.Fatalf("output lacks %q\n%s", m, r)
	}
}
