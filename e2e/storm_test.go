package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/engine"
	"github.com/taskdeck/taskdeck/internal/clitest"
	"github.com/taskdeck/taskdeck/internal/nodetest"
	"github.com/taskdeck/taskdeck/internal/pgtest"
	"github.com/taskdeck/taskdeck/internal/waitfor"
	"github.com/taskdeck/taskdeck/mcpclient"
	mcpconfig "github.com/taskdeck/taskdeck/mcpclient/config"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store"
	"github.com/taskdeck/taskdeck/store/badger"
	"github.com/taskdeck/taskdeck/store/postgres"
)

// The crash storm: hundreds of `taskdeck call` processes, one after
// another on ONE shared store, each killed with SIGKILL at a random moment
// (before its request, while tools/call is in flight, right after the
// handle arrived, while --wait polls). Then a new process reconciles
// (`watch`) and the store is compared with the server's own list of what
// it created. RELIABILITY.md reports the numbers this test logs.

// stormAttempt is what the proxy and the test saw of one killed process.
type stormAttempt struct {
	n      int
	key    string
	args   string
	server string // the configured server of the attempt that owns the key
	wait   bool
	reused bool // the key was used by an earlier attempt

	received     chan struct{} // closed when its tools/call reached the proxy
	receivedOnce sync.Once

	mu       sync.Mutex
	reqAt    time.Duration // since start; 0: no tools/call reached the proxy
	taskID   string        // the task the server created for it
	respSent bool          // the proxy wrote the handle back (the client may not have read it)
	follows  int           // tasks/get or subscriptions/listen for its task that reached the proxy while its process lived
	settled  bool          // its process is dead and all it sent handled: what follows is other processes'
	stdout   string
	exited   bool // ended on its own before the kill
	start    time.Time
}

// phase names the moment the kill fell in, from what the proxy saw and
// what the process printed.
func (a *stormAttempt) phase() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case a.exited:
		return "not killed (ended first)"
	case a.reqAt == 0:
		return "before the request"
	case !a.respSent:
		return "request in flight"
	case a.stdout == "":
		return "handle on the wire, nothing printed"
	case a.wait && a.follows > 0:
		return "while following"
	default:
		return "handle synced and printed"
	}
}

// stormProxy sits between the killed processes and the server. Every
// tools/call is delivered whole to the server (whatever happens to the
// client), and its answer is held back for a random 0–200 ms, so kills
// land while the request is in flight.
type stormProxy struct {
	srv      *httptest.Server
	upstream string
	tagOf    func(r *http.Request, body []byte) string // the tag of a tools/call (stormTarget.tagOf)

	mu sync.Mutex
	// byTag finds the attempt a tools/call belongs to from its tag (one
	// per key): a killed process's request may still sit in the listen
	// backlog when the next process starts, so "the current attempt" is
	// not a safe guess.
	byTag  map[string]*stormAttempt
	byTask map[string]*stormAttempt
	open   int // client connections not yet closed
	calls  int // tools/call delivered to the server
}

// settle waits until every connection of the killed process is closed, so
// that anything it sent has been handled (and attributed to it).
func (sp *stormProxy) settle(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(clitest.WaitTimeout)
	for {
		sp.mu.Lock()
		n := sp.open
		sp.mu.Unlock()
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d proxy connections stayed open after the kill", n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

var taskIDPattern = regexp.MustCompile(`"taskId"\s*:\s*"([^"]+)"`)

func newStormProxy(t *testing.T, upstream string, tagOf func(*http.Request, []byte) string) *stormProxy {
	t.Helper()
	target, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	sp := &stormProxy{upstream: upstream, tagOf: tagOf, byTag: map[string]*stormAttempt{}, byTask: map[string]*stormAttempt{}}
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: target.Scheme, Host: target.Host})
	rp.ErrorLog = nil
	rp.ErrorHandler = func(w http.ResponseWriter, _ *http.Request, _ error) { w.WriteHeader(http.StatusBadGateway) }
	sp.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return // the client died mid-request: nothing was delivered
		}
		// Following a task: polling it, or asking the server to push it.
		var followed []string
		switch r.Header.Get("Mcp-Method") {
		case "tasks/get":
			followed = []string{r.Header.Get("Mcp-Name")}
		case "": // the 2025-11-25 wire names the method in the body only
			var get struct {
				Method string `json:"method"`
				Params struct {
					TaskID string `json:"taskId"`
				} `json:"params"`
			}
			if json.Unmarshal(body, &get) == nil && get.Method == "tasks/get" {
				followed = []string{get.Params.TaskID}
			}
		case "subscriptions/listen":
			var listen struct {
				Params struct {
					Notifications struct {
						TaskIDs []string `json:"taskIds"`
					} `json:"notifications"`
				} `json:"params"`
			}
			_ = json.Unmarshal(body, &listen) // not ours to judge: the server answers it
			followed = listen.Params.Notifications.TaskIDs
		}
		sp.mu.Lock()
		for _, id := range followed {
			if a := sp.byTask[id]; a != nil {
				a.mu.Lock()
				if !a.settled { // later processes follow the open tasks they find, too
					a.follows++
				}
				a.mu.Unlock()
			}
		}
		sp.mu.Unlock()
		if !bytes.Contains(body, []byte(`"method":"tools/call"`)) {
			r.Body = io.NopCloser(bytes.NewReader(body))
			r.ContentLength = int64(len(body))
			rp.ServeHTTP(w, r)
			return
		}
		sp.mu.Lock()
		a := sp.byTag[sp.tagOf(r, body)]
		sp.calls++
		sp.mu.Unlock()
		if a == nil {
			panic("tools/call from no attempt: " + r.URL.String() + " " + string(body))
		}
		a.mu.Lock()
		a.reqAt = max(time.Since(a.start), time.Nanosecond)
		a.mu.Unlock()
		a.receivedOnce.Do(func() { close(a.received) })
		// Deliver the call whatever becomes of the client.
		out, err := http.NewRequestWithContext(context.WithoutCancel(r.Context()), r.Method, upstream, bytes.NewReader(body))
		if err != nil {
			panic(err)
		}
		out.Header = r.Header.Clone()
		resp, err := http.DefaultClient.Do(out)
		if err != nil {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if m := taskIDPattern.FindSubmatch(answer); m != nil {
			a.mu.Lock()
			a.taskID = string(m[1])
			a.mu.Unlock()
			sp.mu.Lock()
			sp.byTask[string(m[1])] = a
			sp.mu.Unlock()
		}
		select {
		case <-time.After(rand.N(200 * time.Millisecond)):
		case <-r.Context().Done():
			return // killed while the call was in flight
		}
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		if _, err := w.Write(answer); err != nil {
			return
		}
		http.NewResponseController(w).Flush()
		a.mu.Lock()
		a.respSent = true
		a.mu.Unlock()
	}))
	sp.srv.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		sp.mu.Lock()
		defer sp.mu.Unlock()
		switch state {
		case http.StateNew:
			sp.open++
		case http.StateClosed, http.StateHijacked:
			sp.open--
		}
	}
	sp.srv.Start()
	t.Cleanup(sp.srv.Close)
	return sp
}

func TestCrashStorm(t *testing.T) {
	t.Parallel()
	crashStorm(t, "", demoStorm(t))
}

// TestCrashStormPostgres is the same storm on a shared PostgreSQL
// database (`--store postgres://…`), where each process runs its own
// engine and no start-up takes the store from the dead: a killed call's
// intent becomes orphaned once it is older than a call can take.
func TestCrashStormPostgres(t *testing.T) {
	t.Parallel()
	crashStorm(t, pgtest.DB(t), demoStorm(t))
}

// TestCrashStormLegacy is the storm against a 2025-11-25 server: ONE
// process of the TypeScript SDK 1.x server (sessionless streamable HTTP,
// one task store, so its tasks outlive the processes that made them and
// tasks/list lists them all) for the whole storm, configured as one
// server, so that every reconcile compares the records with the one list
// that holds all the storm's tasks (a server per attempt, as the demo
// storm has, would list every other attempt's tasks as found). After the
// start-up `watch`, `taskdeck reconcile` compares the records with the
// list (watch does not list), and a second watch polls the orphans it
// resolved to their end. The proxy tells attempts apart by an "attempt"
// argument the tool ignores. The truth is the server's own tasks/list,
// read by the harness directly (not through the proxy) and checked
// against the tools/call the proxy delivered: each listed task has exactly one record holding it (its
// handle, an orphan that reconcile resolved by it, or a found row beside
// the orphaned intent of the call that lost it), and no key launched two.
func TestCrashStormLegacy(t *testing.T) {
	t.Parallel()
	crashStorm(t, "", legacyStorm(t))
}

// stormTarget is the server a storm calls and how the harness reads it.
type stormTarget struct {
	upstream string
	// servers is the config's mcpServers at the proxy's URL; server the
	// one attempt i's fresh key calls.
	servers func(proxyURL string, calls int) map[string]any
	server  func(i int) string
	tool    string
	args    func(i int) string // a fresh key's arguments
	// tag is attempt i's tag, and tagOf a tools/call's, by which the
	// proxy tells which attempt sent it.
	tag   func(i int) string
	tagOf func(r *http.Request, body []byte) string
	truth func(t *testing.T, proxy *stormProxy) stormTruth
	// finds: reconcile lists the server's tasks, and records each it
	// cannot give to an orphan as found.
	finds bool
}

// stormTruth is what the server says it did.
type stormTruth struct {
	calls, created int
	taskIDs        []string
}

// demoStorm is the demo server (2026-07-28), one configured server per
// fresh key, each a URL of its own at the proxy, so that a request names
// the attempt it came from. Configured, not --url: the engines of a
// shared database claim only the tasks of servers in their config.
func demoStorm(t *testing.T) stormTarget {
	srv := startDemo(t, "127.0.0.1:0")
	return stormTarget{
		upstream: srv.url,
		servers: func(proxyURL string, calls int) map[string]any {
			servers := map[string]any{}
			for i := range calls {
				servers[fmt.Sprintf("a%d", i)] = map[string]string{"url": fmt.Sprintf("%s/attempt-%d", proxyURL, i)}
			}
			return servers
		},
		server: func(i int) string { return fmt.Sprintf("a%d", i) },
		tool:   "sleep",
		// 10–29 demo seconds: 0.5–1.5 s at --speed 0.05.
		args:  func(int) string { return fmt.Sprintf(`{"seconds":%d}`, 10+rand.N(20)) },
		tag:   func(i int) string { return fmt.Sprintf("/mcp/attempt-%d", i) },
		tagOf: func(r *http.Request, _ []byte) string { return r.URL.Path },
		truth: func(t *testing.T, _ *stormProxy) stormTruth {
			st := srv.stats(t)
			return stormTruth{calls: st.ToolCalls["sleep"], created: st.TasksCreated, taskIDs: st.TaskIDs}
		},
	}
}

// legacyStorm is the TypeScript SDK 1.x server (see TestCrashStormLegacy).
func legacyStorm(t *testing.T) stormTarget {
	url, _ := nodetest.LegacyServers(t).ServeSDK(t, "0")
	return stormTarget{
		upstream: url,
		servers: func(proxyURL string, _ int) map[string]any {
			return map[string]any{"legacy": map[string]string{"url": proxyURL}}
		},
		server: func(int) string { return "legacy" },
		tool:   "wait",
		args:   func(i int) string { return fmt.Sprintf(`{"ms":%d,"attempt":%d}`, 500+rand.N(1000), i) },
		tag:    strconv.Itoa,
		tagOf: func(_ *http.Request, body []byte) string {
			var call struct {
				Params struct {
					Arguments struct {
						Attempt json.Number `json:"attempt"`
					} `json:"arguments"`
				} `json:"params"`
			}
			_ = json.Unmarshal(body, &call) // no tag: the proxy says so
			return call.Params.Arguments.Attempt.String()
		},
		truth: func(t *testing.T, proxy *stormProxy) stormTruth {
			cfg, err := mcpconfig.ParseConfig("truth.json", fmt.Appendf(nil, `{"mcpServers":{"sdk":{"url":%q}}}`, url))
			if err != nil {
				t.Fatal(err)
			}
			pool := mcpclient.NewPool(mcpclient.PoolOptions{Config: cfg})
			defer pool.Close()
			ctx, cancel := context.WithTimeout(context.Background(), clitest.WaitTimeout)
			defer cancel()
			s, err := pool.Session(ctx, model.ServerRef{Name: "sdk"})
			if err != nil {
				t.Fatal(err)
			}
			listed, err := s.ListTasks(ctx)
			if err != nil {
				t.Fatalf("the server's tasks/list: %v", err)
			}
			tr := stormTruth{created: len(listed)}
			for _, l := range listed {
				tr.taskIDs = append(tr.taskIDs, l.TaskID)
			}
			// The server counts no calls: the proxy's count stands in.
			proxy.mu.Lock()
			tr.calls = proxy.calls
			proxy.mu.Unlock()
			return tr
		},
		finds: true,
	}
}

// crashStorm runs the storm against target on the store conn names: ""
// for Badger in the deck's data directory, else a postgres:// connection
// string.
func crashStorm(t *testing.T, conn string, target stormTarget) {
	calls := 200
	if testing.Short() {
		calls = 40
	}
	proxy := newStormProxy(t, target.upstream, target.tagOf)
	proxyURL := proxy.srv.URL + "/mcp"
	d := newDeck(t)
	cfg, err := json.Marshal(map[string]any{"store": conn, "mcpServers": target.servers(proxyURL, calls)})
	if err != nil {
		t.Fatal(err)
	}
	d.writeConfig(string(cfg))
	began := time.Now()

	var attempts []*stormAttempt
	for i := range calls {
		a := &stormAttempt{n: i, wait: rand.N(2) == 0, received: make(chan struct{})}
		if i > 10 && rand.N(4) == 0 {
			// Re-run an earlier key with the same arguments: it must never
			// launch a second task while its record exists.
			prev := attempts[rand.N(len(attempts))]
			a.key, a.args, a.server, a.reused = prev.key, prev.args, prev.server, true
		} else {
			a.key = fmt.Sprintf("K_%d", i)
			a.args = target.args(i)
			a.server = target.server(i)
		}
		args := []string{"call", "--server", a.server, target.tool, "--args", a.args, "--key", a.key}
		if a.wait {
			args = append(args, "--wait")
		}
		a.start = time.Now() // before the proxy can see a
		if !a.reused {
			proxy.mu.Lock()
			proxy.byTag[target.tag(i)] = a
			proxy.mu.Unlock()
		}
		p := d.start(args...)

		// When to kill: four kinds of moment, so that every phase is hit
		// whatever this machine's speed.
		var timer <-chan time.Time
		switch mode := rand.N(20); {
		case mode < 5: // early: mostly before the request
			timer = time.After(rand.N(150 * time.Millisecond))
		case mode < 12 && !a.reused: // keyed to the request reaching the proxy: mostly in flight
			// (a re-used key sends none; with --wait it follows a call
			// still `calling` until that ends, so it may not exit either)
			select {
			case <-a.received:
				timer = time.After(rand.N(250 * time.Millisecond))
			case <-p.done:
			case <-time.After(clitest.WaitTimeout):
				t.Fatalf("attempt %d: no tools/call and no exit", i)
			}
		case mode < 15 && a.wait && !a.reused: // keyed to its first follow: while following
			if !waitfor.Until(clitest.WaitTimeout, 5*time.Millisecond, func() bool {
				a.mu.Lock()
				defer a.mu.Unlock()
				return a.follows > 0 || p.exited()
			}) {
				t.Fatalf("attempt %d: call --wait neither followed its task nor exited", i)
			}
		default: // anywhere in the first 700 ms, following included
			timer = time.After(rand.N(700 * time.Millisecond))
		}
		if timer != nil {
			select {
			case <-timer:
			case <-p.done:
			}
		}
		a.mu.Lock()
		a.exited = p.exited()
		a.mu.Unlock()
		p.kill()
		proxy.settle(t) // the proxy has handled all the process sent
		a.mu.Lock()
		a.settled = true
		a.stdout = p.Stdout.String()
		// A re-run whose key names an intent without a handle ends 1 ("the
		// task ended calling/orphaned"): nothing to follow, nothing sent.
		rerunOfIntent := a.reused && p.Code == exitTaskBad && strings.Contains(p.Stderr.String(), "nothing new was sent")
		if a.exited && p.Code != 0 && !rerunOfIntent {
			t.Errorf("attempt %d ended on its own with exit %d\n%s\n%s", i, p.Code, a.stdout, p.Stderr.String())
		}
		a.mu.Unlock()
		attempts = append(attempts, a)
	}
	stormTime := time.Since(began)
	var reqSum time.Duration
	reqN := 0
	for _, a := range attempts {
		if a.reqAt > 0 {
			reqSum += a.reqAt
			reqN++
		}
	}
	if reqN > 0 {
		t.Logf("mean time from start to tools/call at the proxy: %s", (reqSum / time.Duration(reqN)).Round(time.Millisecond))
	}

	// The server's own truth.
	st := target.truth(t, proxy)
	reached := 0
	serverTask := map[string]*stormAttempt{}
	perKey := map[string][]string{}
	for _, a := range attempts {
		if a.reqAt > 0 {
			reached++
			if a.taskID == "" {
				t.Errorf("attempt %d: the server answered its tools/call without a task", a.n)
			}
			serverTask[a.taskID] = a
			perKey[a.key] = append(perKey[a.key], a.taskID)
		}
	}
	if st.created != reached || st.calls != reached || len(st.taskIDs) != reached {
		t.Fatalf("the server created %d tasks from %d tools/call; the proxy delivered %d", st.created, st.calls, reached)
	}
	for _, id := range st.taskIDs {
		if serverTask[id] == nil {
			t.Fatalf("the server created task %s that no proxied call asked for", id)
		}
	}
	// Invariant 3: one key, at most one server task.
	for key, ids := range perKey {
		if len(ids) > 1 {
			t.Errorf("key %s launched %d server tasks: %v", key, len(ids), ids)
		}
	}

	// Before reconciliation: every record parses (ls --json) and none is
	// corrupt; intents the kills interrupted are still `calling`.
	before := d.ls()
	calling := 0
	for _, tk := range before {
		if tk.Status == "calling" {
			calling++
		}
	}

	// Start-up reconciliation in a new process, which then polls every
	// open task to its end.
	w := d.run("watch").Must(t, 0)
	if !strings.HasPrefix(w.Stdout, "reconciled: ") {
		t.Fatalf("watch did not report its reconciliation\n%s", w)
	}
	reconcileLine, _, _ := strings.Cut(w.Stdout, "\n")
	if conn != "" {
		orphanIntents(t, d)
	}
	listed := ""
	if target.finds {
		// The comparison with the server's tasks/list (`watch` does not
		// list), then a watch of the orphans it resolved to their end.
		r := d.run("reconcile").Must(t, 0)
		listed = fmt.Sprintf("reconcile: %d orphans resolved, %d tasks found\n", countLines(r.Stdout, "orphan "), countLines(r.Stdout, "found "))
		d.run("watch").Must(t, 0)
	}

	after := d.ls()
	byKey := map[string]task{}
	byTaskID := map[string]task{}
	for _, tk := range after {
		if tk.Key == "" {
			t.Errorf("record %s has no idempotency key", tk.ID)
		}
		if _, dup := byKey[tk.Key]; dup {
			t.Errorf("key %s names two records", tk.Key)
		}
		byKey[tk.Key] = tk
		if tk.TaskID != "" {
			if _, dup := byTaskID[tk.TaskID]; dup {
				t.Errorf("server task %s is held by two records", tk.TaskID)
			}
			byTaskID[tk.TaskID] = tk
		}
		switch tk.Status {
		case "completed", "orphaned":
		case "found":
			if !target.finds {
				t.Errorf("record %s is found, but this server lists nothing", tk.ID)
			}
		default:
			t.Errorf("after watch, record %s (key %s) is %s: want completed or orphaned\n%+v", tk.ID, tk.Key, tk.Status, tk)
		}
	}

	// Invariant 2: every task the server created has a local record: its
	// handle, or (where reconcile cannot list it) an orphaned intent under
	// the same key. Where it can, a task whose handle was lost and that no
	// orphan took is a found row beside its call's orphaned intent.
	handles, lostHandles, foundRows := 0, 0, 0
	for _, id := range st.taskIDs {
		a := serverTask[id]
		if tk, ok := byTaskID[id]; ok && tk.Status == "found" {
			foundRows++
			if o := byKey[a.key]; o.Status != "orphaned" || o.TaskID != "" {
				t.Errorf("server task %s (attempt %d) is found; its key's record is %+v, want an orphaned intent", id, a.n, o)
			}
			if ph := a.phase(); ph != "request in flight" && ph != "handle on the wire, nothing printed" {
				t.Errorf("attempt %d lost its handle (its task found) although it was killed %s", a.n, ph)
			}
			continue
		} else if ok {
			handles++
			if tk.Key != a.key || tk.Status != "completed" {
				t.Errorf("server task %s: record %+v, want key %s completed", id, tk, a.key)
			}
			continue
		}
		tk, ok := byKey[a.key]
		switch {
		case !ok:
			t.Errorf("server task %s (attempt %d, %s) has no local record at all", id, a.n, a.phase())
		case tk.Status != "orphaned" || tk.TaskID != "":
			t.Errorf("server task %s (attempt %d) is missing; its key's record is %+v", id, a.n, tk)
		case target.finds:
			t.Errorf("server task %s (attempt %d, %s) has neither a record nor a found row", id, a.n, a.phase())
		default:
			lostHandles++
			// Invariant 1: a process that printed anything had the handle
			// on disk first, so only a kill between request and handle
			// may lose it.
			if ph := a.phase(); ph != "request in flight" && ph != "handle on the wire, nothing printed" {
				t.Errorf("attempt %d lost its handle although it was killed %s", a.n, ph)
			}
		}
	}
	// Every orphan is an intent a kill interrupted: its call either reached
	// the server (and the handle was lost) or never left.
	orphans, orphansNeverSent := 0, 0
	for _, tk := range after {
		if tk.Status != "orphaned" {
			continue
		}
		orphans++
		if len(perKey[tk.Key]) == 0 {
			orphansNeverSent++
		}
	}
	if orphans != lostHandles+foundRows+orphansNeverSent {
		t.Errorf("%d orphans, but %d lost handles (%d of their tasks found) and %d calls that never left", orphans, lostHandles+foundRows, foundRows, orphansNeverSent)
	}
	// Kills in flight must have left an orphan (or, if the handle was read
	// just before the kill, the handle).
	inFlight := 0
	for _, a := range attempts {
		if a.phase() == "request in flight" {
			inFlight++
			if tk := byKey[a.key]; tk.Status != "orphaned" && tk.TaskID != a.taskID {
				t.Errorf("attempt %d killed in flight: record %+v", a.n, tk)
			}
		}
	}

	// Every record reads back from the store itself.
	s, err := openStore(d, conn)
	if err != nil {
		t.Fatalf("the store does not open after the storm: %v", err)
	}
	all, err := s.All()
	if err != nil {
		t.Fatalf("reading every record: %v", err)
	}
	for _, rec := range all {
		if _, err := s.Get(rec.ID); err != nil {
			t.Errorf("record %s: %v", rec.ID, err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if len(all) != len(after) {
		t.Errorf("the store holds %d records, ls --json printed %d", len(all), len(after))
	}

	phases := map[string]int{}
	reruns := 0
	for _, a := range attempts {
		phases[a.phase()]++
		if a.reused {
			reruns++
		}
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for k := range phases {
			if !yield(k) {
				return
			}
		}
	})
	var sb strings.Builder
	fmt.Fprintf(&sb, "crash storm: %d `taskdeck call` processes on one store (%d re-used an earlier key, %d with --wait) in %s\n",
		calls, reruns, countWait(attempts), stormTime.Round(100*time.Millisecond))
	for _, n := range names {
		fmt.Fprintf(&sb, "  killed %-36s %4d\n", n+":", phases[n])
	}
	fmt.Fprintf(&sb, "server: %d tools/call received, %d tasks created\n", st.calls, st.created)
	fmt.Fprintf(&sb, "store before reconciliation: %d records, %d still `calling`\n", len(before), calling)
	fmt.Fprintf(&sb, "watch: %s\n%s", reconcileLine, listed)
	fmt.Fprintf(&sb, "server tasks with their handle on disk: %d; with an orphaned intent instead: %d; found rows beside one: %d; missing: %d\n",
		handles, lostHandles, foundRows, len(st.taskIDs)-handles-lostHandles-foundRows)
	fmt.Fprintf(&sb, "orphans: %d (%d whose call reached the server, %d whose call never left)\n", orphans, lostHandles+foundRows, orphansNeverSent)
	fmt.Fprintf(&sb, "keys that launched more than one server task: %d\n", countMulti(perKey))
	t.Log("\n" + sb.String())

	if !testing.Short() {
		for _, want := range []string{"before the request", "request in flight", "handle synced and printed", "while following"} {
			if phases[want] == 0 {
				t.Errorf("no kill fell %s: the storm did not cover every phase", want)
			}
		}
	}
	t.Logf("kills in flight: %d, each left an orphan or its handle", inFlight)
}

func countWait(as []*stormAttempt) int {
	n := 0
	for _, a := range as {
		if a.wait {
			n++
		}
	}
	return n
}

// countLines counts the lines of s that begin with prefix.
func countLines(s, prefix string) int {
	n := 0
	for l := range strings.Lines(s) {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}

func countMulti(perKey map[string][]string) int {
	n := 0
	for _, ids := range perKey {
		if len(ids) > 1 {
			n++
		}
	}
	return n
}

// openStore opens the store conn names ("" for the deck's Badger store)
// as the test reads it back.
func openStore(d *deck, conn string) (store.Backend, error) {
	if conn == "" {
		return badger.Open(d.dataDir, nil)
	}
	ctx, cancel := context.WithTimeout(context.Background(), clitest.WaitTimeout)
	defer cancel()
	return postgres.Open(ctx, conn, nil)
}

// orphanIntents is the start-up reconcile of a shared database, where no
// process may take a dead one's intents at start (another host may be
// calling): an engine orphans an intent it claims at once when the engine
// that made it is no longer alive, its heartbeat run out a lease after
// the kill. A `serve` does it to every intent the storm left `calling`
// within a lease and two claim rounds, not after the age of a call.
func orphanIntents(t *testing.T, d *deck) {
	t.Helper()
	p := d.start("serve")
	began := time.Now()
	bound := engine.DefaultClaimLease + 2*engine.DefaultClaimRenew
	waitfor.Within(t, bound, "every intent the storm left `calling` to be orphaned", func() bool {
		return !slices.ContainsFunc(d.ls(), func(tk task) bool { return tk.Status == "calling" })
	})
	t.Logf("serve orphaned the storm's intents within %s", time.Since(began).Round(100*time.Millisecond))
	p.kill()
}
