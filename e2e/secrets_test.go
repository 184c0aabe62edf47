package e2e

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/internal/clitest"
	"github.com/taskdeck/taskdeck/internal/hostile"
)

// TestSecretsStayOutOfStoreAndLog: a secret used through ${VAR} in an
// HTTP server's headers and in a stdio server's env reaches neither the
// store's files (raw bytes, Badger's included) nor the log, also at debug
// level; the data directory is 0700 and every file in it 0600.
func TestSecretsStayOutOfStoreAndLog(t *testing.T) {
	t.Parallel()
	srv := startDemo(t, "127.0.0.1:0")
	secret := "tdsecret-" + rand.Text()
	d := newDeck(t)
	d.env = append(d.env, "TD_TOKEN="+secret)
	d.writeConfig(fmt.Sprintf(`{"mcpServers":{
		"web":{"url":%q,"headers":{"Authorization":"Bearer ${TD_TOKEN}","X-Api-Key":"${TD_TOKEN}"}},
		"local":{"command":%q,"args":["demo-server","--stdio","--speed",%q],"env":{"DEMO_TOKEN":"${TD_TOKEN}"}}}}`,
		srv.url, tdBin, demoSpeed))

	for _, v := range [][]string{nil, {"-v"}} {
		run := func(args ...string) clitest.Result { return d.run(append(v, args...)...) }
		run("call", "--server", "web", "echo", "--args", `{"text":"hi"}`).Must(t, 0)
		run("call", "--server", "web", "sleep", "--args", `{"seconds":1}`, "--wait").Must(t, 0)
		run("call", "--server", "local", "echo", "--args", `{"text":"hi"}`).Must(t, 0)
		run("call", "--server", "web", "fail", "--args", `{"mode":"error"}`, "--wait").Must(t, exitTaskBad)
		run("tools", "web").Must(t, 0)
		run("tools", "local").Must(t, 0)
		run("watch").Must(t, 0)
	}
	// A poll that fails is what taskdeck logs at debug level.
	open := clitest.OnlyID(t, d.run("call", "--server", "web", "sleep", "--args", `{"seconds":600}`).Must(t, 0))
	srv.p.kill()
	d.run("-v", "get", open).Must(t, 0)
	if n := len(d.ls()); n != 9 {
		t.Fatalf("%d tasks, want 9", n)
	}

	dir, err := os.Stat(d.dataDir)
	if err != nil {
		t.Fatal(err)
	}
	if dir.Mode().Perm() != 0o700 {
		t.Errorf("data directory is %v, want 0700", dir.Mode().Perm())
	}
	var files []string
	err = filepath.WalkDir(d.dataDir, func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		files = append(files, filepath.Base(path))
		fi, err := e.Info()
		if err != nil {
			return err
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s is %v, want 0600", path, fi.Mode().Perm())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	noSecretIn(t, d.dataDir, secret)
	for _, want := range []string{"taskdeck.log", "MANIFEST"} {
		if !strings.Contains(strings.Join(files, " "), want) {
			t.Errorf("no %s among the files checked: %v", want, files)
		}
	}
	if log, _ := os.ReadFile(filepath.Join(d.dataDir, "taskdeck.log")); !bytes.Contains(log, []byte("level=DEBUG")) {
		t.Errorf("-v wrote no debug lines to the log, so the check proves less than it says")
	}
}

// TestTaskIDsStayOutOfTheLog: server task ids are bearer tokens; at the
// default log level none of them is written to the log.
func TestTaskIDsStayOutOfTheLog(t *testing.T) {
	t.Parallel()
	srv := startDemo(t, "127.0.0.1:0")
	d := newDeck(t)
	d.run("call", "--url", srv.url, "sleep", "--args", `{"seconds":1}`, "--wait").Must(t, 0)
	d.run("call", "--url", srv.url, "fail", "--args", `{"mode":"error"}`, "--wait").Must(t, exitTaskBad)
	approve := clitest.OnlyID(t, d.run("call", "--url", srv.url, "approve", "--args", `{"action":"x"}`).Must(t, 0))
	d.waitStatus(approve, "input_required")
	d.run("answer", approve, "approve-1", approveAnswer).Must(t, 0)
	d.run("watch").Must(t, 0)
	cancel := clitest.OnlyID(t, d.run("call", "--url", srv.url, "sleep", "--args", `{"seconds":600}`).Must(t, 0))
	d.run("cancel", cancel).Must(t, 0)
	d.run("watch").Must(t, 0)
	// The server was taken down under an open task: errors get logged too.
	open := clitest.OnlyID(t, d.run("call", "--url", srv.url, "sleep", "--args", `{"seconds":600}`).Must(t, 0))
	ids := srv.stats(t).TaskIDs
	srv.p.kill()
	d.run("get", open).Must(t, 0)

	if len(ids) < 5 {
		t.Fatalf("server created %d tasks", len(ids))
	}
	log, err := os.ReadFile(filepath.Join(d.dataDir, "taskdeck.log"))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if bytes.Contains(log, []byte(id)) {
			t.Errorf("task id %s… is in the log at the default level", id[:6])
		}
	}
}

// TestStdioCommandIsNotShellInterpreted: a configured command holding
// shell syntax is one program name to exec, never a shell command line.
func TestStdioCommandIsNotShellInterpreted(t *testing.T) {
	t.Parallel()
	d := newDeck(t)
	marker := filepath.Join(t.TempDir(), "pwned")
	d.writeConfig(fmt.Sprintf(`{"mcpServers":{
		"space":{"command":"touch %[1]s"},
		"semicolon":{"command":"/bin/true;touch %[1]s"},
		"subshell":{"command":"$(touch %[1]s)"},
		"args":{"command":"/bin/true","args":[";","touch","%[1]s","&&","touch","%[1]s"]}}}`, marker))
	for _, name := range []string{"space", "semicolon", "subshell"} {
		r := d.run("call", "--server", name, "echo").Must(t, exitUnreachable)
		clitest.OneErrorLine(t, r, "server "+name+" unreachable", "no such file or directory")
	}
	// /bin/true takes the shell syntax as arguments, ignores them, and
	// exits: the server is gone before it answered.
	r := d.run("call", "--server", "args", "echo")
	if r.Code == 0 {
		t.Fatalf("a server that exits at once was called\n%s", r)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("a shell ran the configured command")
	}
}

// TestPlainHTTPToARemoteHostWarns: reaching a non-loopback server over
// plain http prints one warning line. No traffic leaves the machine: the
// taskdeck process gets HTTP_PROXY pointing at a loopback proxy (Go's
// transport honours it for every non-loopback host), which records the
// request and hands it to a loopback demo server.
func TestPlainHTTPToARemoteHostWarns(t *testing.T) {
	t.Parallel()
	srv := startDemo(t, "127.0.0.1:0")
	target, _ := url.Parse("http://" + srv.addr)
	var mu sync.Mutex
	hosts := map[string]int{}
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hosts[r.URL.Host]++
		mu.Unlock()
		r.Host = target.Host // the demo server refuses other hosts (DNS rebinding)
		httputil.NewSingleHostReverseProxy(target).ServeHTTP(w, r)
	}))
	t.Cleanup(proxy.Close)
	d := newDeck(t)
	var env []string
	for _, kv := range d.env {
		k, _, _ := strings.Cut(strings.ToUpper(kv), "=")
		if k != "HTTP_PROXY" && k != "HTTPS_PROXY" && k != "NO_PROXY" && k != "ALL_PROXY" {
			env = append(env, kv)
		}
	}
	d.env = append(env, "HTTP_PROXY="+proxy.URL, "NO_PROXY=")
	remote := "http://192.0.2.1:9/mcp" // TEST-NET-1: documentation only
	warning := "taskdeck: warning: server " + remote + " is reached over plain http on a non-loopback address"

	for _, args := range [][]string{{"tools", "--url", remote}, {"call", "--url", remote, "echo", "--args", `{"text":"x"}`}} {
		r := d.run(args...).Must(t, 0)
		if lines := strings.Split(strings.TrimRight(r.Stderr, "\n"), "\n"); len(lines) != 1 || !strings.HasPrefix(lines[0], warning) {
			t.Fatalf("want exactly one warning line on stderr\n%s", r)
		}
	}
	// The loopback demo server, not TEST-NET, answered.
	r := d.run("call", "--url", "http://"+srv.addr+"/mcp", "echo", "--args", `{"text":"x"}`).Must(t, 0)
	if r.Stderr != "" {
		t.Fatalf("a loopback server warned\n%s", r)
	}
	mu.Lock()
	defer mu.Unlock()
	if hosts["192.0.2.1:9"] == 0 || len(hosts) != 1 {
		t.Fatalf("the proxy saw %v, want requests for 192.0.2.1:9 only", hosts)
	}
}

// TestURLSecretsStayOutOfErrors: a secret in a configured URL, through
// ${VAR} in its query string or its userinfo, is in no error taskdeck
// stores, prints or logs (also at -v), whatever the server does: refuse
// the connection, answer 500, redirect, answer with bad JSON.
func TestURLSecretsStayOutOfErrors(t *testing.T) {
	t.Parallel()
	srv := hostile.Start(t, demo.Options{Speed: 0.05, PollInterval: 20 * time.Millisecond})
	target := hostile.StartRecorder(t)
	secret := "tdsecret-" + rand.Text()
	front, _ := url.Parse(srv.URL)
	d := newDeck(t)
	d.env = append(d.env, "TD_TOKEN="+secret)
	d.writeConfig(fmt.Sprintf(`{"mcpServers":{
		"q":{"url":%q},
		"u":{"url":%q},
		"down":{"url":%q}}}`,
		srv.URL+"?token=${TD_TOKEN}", "http://td:${TD_TOKEN}@"+front.Host+"/mcp", "http://"+clitest.ClosedPort(t)+"/mcp?token=${TD_TOKEN}"))
	faults := map[string]hostile.Fault{
		"500":      hostile.HTTPStatus(500),
		"redirect": hostile.Redirect(307, target.URL+"/mcp?token="+secret),
		"bad JSON": hostile.NotJSON(),
	}
	var runs []clitest.Result
	run := func(want int, args ...string) clitest.Result {
		t.Helper()
		r := d.run(args...)
		runs = append(runs, r)
		if want >= 0 {
			r.Must(t, want)
		}
		return r
	}
	for _, v := range [][]string{nil, {"-v"}} {
		args := func(a ...string) []string { return append(append([]string(nil), v...), a...) }
		clitest.OneErrorLine(t, run(exitUnreachable, args("call", "--server", "down", "echo")...), "server down")
		clitest.OneErrorLine(t, run(exitUnreachable, args("tools", "down")...), "server down")
		open := map[string]string{}
		for _, server := range []string{"q", "u"} {
			open[server] = clitest.OnlyID(t, run(0, args("call", "--server", server, "sleep", "--args", `{"seconds":600}`)...))
		}
		for name, f := range faults {
			for _, method := range []string{"tools/call", "tools/list", "tasks/get"} {
				srv.On(method, f)
			}
			for _, server := range []string{"q", "u"} {
				r := run(-1, args("call", "--server", server, "echo", "--args", `{"text":"x"}`)...)
				if r.Code == 0 {
					t.Fatalf("a call answered with %s succeeded\n%s", name, r)
				}
				clitest.OneErrorLine(t, r, "server "+server)
				run(-1, args("tools", server)...)
				run(-1, args("get", open[server])...)
				run(-1, args("get", open[server], "--json")...)
			}
			// watch never ends while polls fail: stop it once it said so.
			w := d.start(args("watch")...)
			clitest.WaitFor(t, "watch to report the failing polls", func() bool {
				return strings.Count(w.Stderr.String(), "poll failed") >= 2 || w.exited()
			})
			w.kill()
			runs = append(runs, clitest.Result{Args: []string{"watch"}, Stdout: w.Stdout.String(), Stderr: w.Stderr.String()})
			for _, method := range []string{"tools/call", "tools/list", "tasks/get"} {
				srv.On(method, nil)
			}
		}
		run(0, args("ls", "--json")...)
		run(0, args("ls")...)
	}
	for _, r := range runs {
		if strings.Contains(r.Stdout+r.Stderr, secret) {
			t.Errorf("the secret is in the output\n%s", r)
		}
	}
	if got := target.Received(); len(got) > 0 {
		t.Errorf("the redirect target received %d requests", len(got))
	}
	noSecretIn(t, d.dataDir, secret)
	if log, _ := os.ReadFile(filepath.Join(d.dataDir, "taskdeck.log")); !bytes.Contains(log, []byte("poll failed")) {
		t.Errorf("the log holds no failed poll, so the check proves less than it says")
	}
}

// TestCallSurvivesAStopPastItsTimeout: a `call` stopped (SIGSTOP) for
// longer than its request timeout, while the server's answer arrives,
// keeps the task's handle when it is resumed: the stop is not counted as
// time the server took.
func TestCallSurvivesAStopPastItsTimeout(t *testing.T) {
	t.Parallel()
	srv := hostile.Start(t, demo.Options{Speed: 0.05, PollInterval: 20 * time.Millisecond})
	held := srv.Hold("tools/call")
	d := newDeck(t)
	d.writeConfig(fmt.Sprintf(`{"mcpServers":{"web":{"url":%q}}}`, srv.URL))
	const timeout = time.Second
	p := d.start("--request-timeout", timeout.String(), "call", "--server", "web", "sleep", "--args", `{"seconds":600}`)
	clitest.WaitFor(t, "the server to receive the call", func() bool { return len(srv.Requests("tools/call")) > 0 || p.exited() })
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	held.Release()
	select {
	case <-held.Answered():
	case <-time.After(clitest.WaitTimeout):
		t.Fatal("the server did not answer the call")
	}
	// The stop itself must outlast the request timeout: this is its
	// length, not a wait for something to happen.
	time.Sleep(time.Until(stopped.Add(3 * timeout)))
	if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(clitest.WaitTimeout):
		t.Fatal("call did not end after SIGCONT")
	}
	r := clitest.Result{Args: []string{"call"}, Stdout: p.Stdout.String(), Stderr: p.Stderr.String(), Code: p.Code}
	id := clitest.OnlyID(t, r.Must(t, 0))
	if tk := d.getJSON(id); tk.TaskID == "" || tk.Status != "working" {
		t.Fatalf("after the stop the task is %s with handle %q; want working with its handle\n%s", tk.Status, tk.TaskID, r)
	}
}

// noSecretIn fails the test for every file below dir whose bytes hold secret.
func noSecretIn(t *testing.T, dir, secret string) {
	t.Helper()
	err := filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if bytes.Contains(b, []byte(secret)) {
			t.Errorf("the secret is in %s", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
