package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/taskdeck/taskdeck/internal/clitest"
)

// TestCrashWhilePolling: a `call --wait` killed while it polls leaves its
// record with the handle on disk, and a new process finishes the task.
func TestCrashWhilePolling(t *testing.T) {
	t.Parallel()
	srv := startDemo(t, "127.0.0.1:0")
	d := newDeck(t)
	tasks := d.callKilledWhileWorking("--url", srv.url, "sleep", "--args", `{"seconds":60}`)
	st := srv.stats(t)
	if len(tasks) != 1 || tasks[0].TaskID == "" || tasks[0].Status != "working" {
		t.Fatalf("after SIGKILL, ls --json: %+v", tasks)
	}
	if st.TasksCreated != 1 || st.TaskIDs[0] != tasks[0].TaskID {
		t.Fatalf("server created %v, the store has %q", st.TaskIDs, tasks[0].TaskID)
	}
	w := d.run("watch").Must(t, 0)
	clitest.MustContain(t, w, w.Stdout, "1 re-attached", tasks[0].ID, " completed ", "slept 60 s")
	if tk := d.getJSON(tasks[0].ID); tk.Status != "completed" || tk.resultText() != "slept 60 s" {
		t.Fatalf("after watch: %+v", tk)
	}
}

// holdingProxy forwards MCP traffic to a demo server over loopback, but
// the response to tools/call (which the server did receive and act on)
// is never delivered: the moment between intent and handle, held open
// (or, with drop, ended by closing the client's connection).
type holdingProxy struct {
	drop     bool
	pass     atomic.Bool // from now on, deliver tools/call's answers too
	srv      *httptest.Server
	received chan struct{} // closed once a tools/call reached the server
	once     sync.Once
	release  chan struct{}
}

func newHoldingProxy(t *testing.T, upstream string, drop bool) *holdingProxy {
	t.Helper()
	target, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	hp := &holdingProxy{drop: drop, received: make(chan struct{}), release: make(chan struct{})}
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: target.Scheme, Host: target.Host})
	hp.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var msg struct {
			Method string `json:"method"`
		}
		if json.Unmarshal(body, &msg) != nil || msg.Method != "tools/call" || hp.pass.Load() {
			r.Body = io.NopCloser(bytes.NewReader(body))
			r.ContentLength = int64(len(body))
			rp.ServeHTTP(w, r)
			return
		}
		// Deliver the call, read the whole answer (the handle), drop it.
		out, err := http.NewRequestWithContext(r.Context(), r.Method, upstream, bytes.NewReader(body))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		out.Header = r.Header.Clone()
		resp, err := http.DefaultClient.Do(out)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		hp.once.Do(func() { close(hp.received) })
		if hp.drop {
			if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
				conn.Close()
			}
			return
		}
		select {
		case <-r.Context().Done(): // the client went away
		case <-hp.release:
		}
	}))
	t.Cleanup(func() {
		close(hp.release)
		hp.srv.Close()
	})
	return hp
}

func (hp *holdingProxy) url() string { return hp.srv.URL + "/mcp" }

// TestCrashBetweenIntentAndHandle: a process killed after tools/call went
// out but before the handle came back leaves a record; the next start
// turns it orphaned and shows it. Never nothing.
func TestCrashBetweenIntentAndHandle(t *testing.T) {
	t.Parallel()
	srv := startDemo(t, "127.0.0.1:0")
	proxy := newHoldingProxy(t, srv.url, false)
	d := newDeck(t)
	p := d.start("call", "--url", proxy.url(), "sleep", "--args", `{"seconds":1}`, "--key", "held")
	select {
	case <-proxy.received:
	case <-p.done:
		t.Fatalf("call ended before its tools/call arrived: exit %d\n%s\n%s", p.Code, p.Stdout, p.Stderr)
	}
	p.kill()
	if p.Stdout.String() != "" {
		t.Fatalf("the call printed before it had a handle: %q", p.Stdout)
	}
	if st := srv.stats(t); st.TasksCreated != 1 {
		t.Fatalf("the server created %d tasks, want 1", st.TasksCreated)
	}

	// The next owner of the store (here ls) finds the intent and, being
	// its sole writer, turns it orphaned; nothing is sent.
	tasks := d.ls()
	if len(tasks) != 1 || tasks[0].Status != "orphaned" || tasks[0].TaskID != "" || tasks[0].Tool != "sleep" {
		t.Fatalf("after SIGKILL between intent and handle, ls --json: %+v", tasks)
	}
	id := tasks[0].ID

	// watch reports and shows it.
	w := d.run("watch").Must(t, 0)
	clitest.MustContain(t, w, w.Stdout, "1 orphaned", id, "orphaned")
	tasks = d.ls()
	if len(tasks) != 1 || tasks[0].ID != id || tasks[0].Status != "orphaned" {
		t.Fatalf("after watch, ls --json: %+v", tasks)
	}
	if !strings.Contains(tasks[0].StatusMessage, "may have started") {
		t.Fatalf("orphaned message %q should say the server may have started it", tasks[0].StatusMessage)
	}
	// Never silently re-sent: the same key returns the orphan, sends nothing.
	again := d.run("call", "--url", proxy.url(), "sleep", "--args", `{"seconds":1}`, "--key", "held").Must(t, 0)
	if clitest.OnlyID(t, again) != id {
		t.Fatalf("same key after the crash:\n%s", again)
	}
	if st := srv.stats(t); st.ToolCalls["sleep"] != 1 {
		t.Fatalf("the orphaned call was re-sent: %+v", st)
	}
	// watch again: the orphan waits for the operator; nothing to poll.
	w = d.run("watch").Must(t, 0)
	clitest.MustContain(t, w, w.Stdout, "1 orphaned")
}

// TestConnectionLostDuringCall: the server took the call but the
// connection broke before the handle arrived. The call may run on the
// server, so the record is orphaned (not failed), the exit says the server
// was unreachable, and the key is not released for a second launch.
func TestConnectionLostDuringCall(t *testing.T) {
	t.Parallel()
	srv := startDemo(t, "127.0.0.1:0")
	proxy := newHoldingProxy(t, srv.url, true)
	d := newDeck(t)
	args := []string{"call", "--url", proxy.url(), "sleep", "--args", `{"seconds":1}`, "--key", "dropped"}
	r := d.run(args...).Must(t, exitUnreachable)
	clitest.OneErrorLine(t, r)
	if st := srv.stats(t); st.TasksCreated != 1 {
		t.Fatalf("the server created %d tasks, want 1", st.TasksCreated)
	}
	tasks := d.ls()
	if len(tasks) != 1 || tasks[0].Status != "orphaned" || !strings.Contains(tasks[0].StatusMessage, "may have started") {
		t.Fatalf("after the connection broke mid-call, ls --json: %+v", tasks)
	}
	again := d.run(args...).Must(t, 0)
	if clitest.OnlyID(t, again) != tasks[0].ID {
		t.Fatalf("same key after a lost call:\n%s", again)
	}
	if st := srv.stats(t); st.ToolCalls["sleep"] != 1 {
		t.Fatalf("a call that may be running was sent again: %+v", st)
	}
}

// callKilledWhileWorking runs `call ARGS --wait`, SIGKILLs it by its pid
// once it printed the task working, and returns what ls then lists.
func (d *deck) callKilledWhileWorking(args ...string) []task {
	d.t.Helper()
	p := d.start(append(append([]string{"call"}, args...), "--wait")...)
	clitest.WaitFor(d.t, "call --wait to print the working status", func() bool {
		return strings.Contains(p.Stdout.String(), " working ") || p.exited()
	})
	if p.exited() {
		d.t.Fatalf("call --wait ended early: exit %d\nstdout:\n%s\nstderr:\n%s", p.Code, p.Stdout, p.Stderr)
	}
	p.kill()
	return d.ls()
}
