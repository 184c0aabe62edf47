package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/internal/waitfor"
	"github.com/taskdeck/taskdeck/mcpclient"
	mcpconfig "github.com/taskdeck/taskdeck/mcpclient/config"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store/badger"
)

// Faults on the wire: a fault-injecting proxy on loopback between the
// tracker and a real demo server. Under each fault the tracker keeps
// watching, shows the error on the task, backs off as the poll policy
// says, writes nothing, leaks no goroutine, and every task finishes once
// the fault stops. RELIABILITY.md reports the numbers these tests log.

// faultPolicy: fast, with a 400 ms cap, so that backoff is visible in a
// few seconds.
var faultPolicy = model.PollPolicy{Default: 50 * time.Millisecond, Floor: 20 * time.Millisecond, Cap: 400 * time.Millisecond, Growth: 1.6, Jitter: 0.1}

// fault is what the proxy does to tasks/get (and, for connection-level
// faults, to every request) while it is set.
type fault string

const (
	faultNone        fault = ""
	faultDrop        fault = "drop connections"
	faultStall       fault = "delay past the request timeout"
	faultSlow        fault = "delay 150 ms"
	fault500         fault = "HTTP 500"
	fault502         fault = "HTTP 502"
	fault503         fault = "HTTP 503"
	fault429         fault = "HTTP 429 Retry-After: 1"
	fault503After    fault = "HTTP 503 Retry-After: 1"
	faultTruncate    fault = "truncated body"
	faultBadJSON     fault = "invalid JSON"
	faultBadStatus   fault = "unknown status"
	faultBadResult   fault = "unknown resultType"
	faultHugeMessage fault = "10 MB status message"
	faultFlap        fault = "flapping up and down"
)

type faultProxy struct {
	srv *httptest.Server
	rp  *httputil.ReverseProxy

	mu    sync.Mutex
	fault fault
	since time.Time
	gets  map[string][]time.Time // task id → tasks/get arrivals during the fault; "" → other requests
}

func newFaultProxy(t *testing.T, upstream string) *faultProxy {
	t.Helper()
	target, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	fp := &faultProxy{rp: httputil.NewSingleHostReverseProxy(target), gets: map[string][]time.Time{}}
	fp.rp.ErrorHandler = func(w http.ResponseWriter, _ *http.Request, _ error) { w.WriteHeader(http.StatusBadGateway) }
	fp.srv = httptest.NewServer(http.HandlerFunc(fp.serve))
	t.Cleanup(fp.srv.Close)
	return fp
}

func (fp *faultProxy) set(f fault) {
	fp.mu.Lock()
	defer fp.mu.Unlock()
	fp.fault, fp.since, fp.gets = f, time.Now(), map[string][]time.Time{}
}

// polls returns the tasks/get arrivals per task since the fault was set.
func (fp *faultProxy) polls() map[string][]time.Time {
	fp.mu.Lock()
	defer fp.mu.Unlock()
	out := map[string][]time.Time{}
	for k, v := range fp.gets {
		out[k] = append([]time.Time(nil), v...)
	}
	return out
}

func (fp *faultProxy) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			TaskID string `json:"taskId"`
		} `json:"params"`
	}
	_ = json.Unmarshal(body, &msg)
	fp.mu.Lock()
	f, since := fp.fault, fp.since
	if f != faultNone {
		// tasks/get under its task; anything else (a reconnect) under "".
		key := ""
		if msg.Method == "tasks/get" {
			key = msg.Params.TaskID
		}
		fp.gets[key] = append(fp.gets[key], time.Now())
	}
	fp.mu.Unlock()
	if f == faultFlap {
		// Down for 200 ms, up for 200 ms.
		if time.Since(since)/(200*time.Millisecond)%2 == 0 {
			f = faultDrop
		} else {
			f = faultNone
		}
	}
	// Connection-level faults hit everything; the rest hit tasks/get.
	switch f {
	case faultDrop:
		hijackClose(w)
		return
	case faultStall:
		select {
		case <-time.After(1500 * time.Millisecond):
		case <-r.Context().Done():
			return
		}
	}
	if msg.Method != "tasks/get" {
		fp.rp.ServeHTTP(w, r)
		return
	}
	switch f {
	case faultSlow:
		time.Sleep(150 * time.Millisecond)
	case fault500, fault502, fault503:
		code := map[fault]int{fault500: 500, fault502: 502, fault503: 503}[f]
		http.Error(w, http.StatusText(code), code)
		return
	case fault429, fault503After:
		w.Header().Set("Retry-After", "1")
		code := map[fault]int{fault429: 429, fault503After: 503}[f]
		http.Error(w, http.StatusText(code), code)
		return
	case faultTruncate:
		rec := httptest.NewRecorder()
		fp.rp.ServeHTTP(rec, r)
		full := rec.Body.Bytes()
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.Header().Set("Content-Length", fmt.Sprint(len(full)))
		w.WriteHeader(rec.Code)
		w.Write(full[:len(full)/2])
		panic(http.ErrAbortHandler) // close the connection mid-body
	case faultBadJSON:
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(msg.ID)+`,"result":{"resultType":"complete","taskId":`)
		return
	case faultBadStatus, faultBadResult, faultHugeMessage:
		res := map[string]any{"resultType": "complete", "taskId": msg.Params.TaskID, "status": "working",
			"createdAt": time.Now().UTC().Format(time.RFC3339), "lastUpdatedAt": time.Now().UTC().Format(time.RFC3339), "ttlMs": 600000}
		switch f {
		case faultBadStatus:
			res["status"] = "exploded"
		case faultBadResult:
			res["resultType"] = "sideways"
		case faultHugeMessage:
			res["statusMessage"] = strings.Repeat("x", 10<<20)
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": msg.ID, "result": res})
		return
	}
	fp.rp.ServeHTTP(w, r)
}

func hijackClose(w http.ResponseWriter) {
	if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
		conn.Close()
	}
}

// faultEnv is a demo server behind a fault proxy, and a tracker over a
// real store that reaches the server only through the proxy.
type faultEnv struct {
	demo    *demo.Server
	http    *httptest.Server
	proxy   *faultProxy
	store   *badger.Store
	pool    *mcpclient.Pool
	tracker *tracker
	ref     model.ServerRef
}

func newFaultEnv(t *testing.T) *faultEnv {
	t.Helper()
	e := &faultEnv{ref: model.ServerRef{Name: "demo"}}
	e.demo = demo.New(demo.Options{Speed: 0.05, PollInterval: 20 * time.Millisecond})
	e.http = httptest.NewServer(e.demo.Handler())
	e.proxy = newFaultProxy(t, e.http.URL)
	cfg, err := mcpconfig.ParseConfig("faults.json", fmt.Appendf(nil, `{"mcpServers":{"demo":{"url":%q}}}`, e.proxy.srv.URL+"/mcp"))
	if err != nil {
		t.Fatal(err)
	}
	e.store, err = badger.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	e.pool = mcpclient.NewPool(mcpclient.PoolOptions{Config: cfg})
	e.tracker = newTracker(e.store, e.pool, trackerOptions{Policy: faultPolicy, RequestTimeout: time.Second})
	return e
}

func (e *faultEnv) close() {
	e.pool.Close()
	e.store.Close()
	e.proxy.srv.Close()
	e.http.Close()
	e.demo.Close()
}

// settleGoroutines waits for the goroutine count to come back to base.
func settleGoroutines(base int) int {
	n := runtime.NumGoroutine()
	for deadline := time.Now().Add(waitfor.Scale(5 * time.Second)); n > base && time.Now().Before(deadline); n = runtime.NumGoroutine() {
		time.Sleep(20 * time.Millisecond)
	}
	return n
}

// maxPolls is the most polls of one task the policy allows in d of
// consecutive failures: the first at once, then the backoff delays
// (without jitter, which only adds) starting from the fastest possible
// state, plus one poll already in flight when the fault began.
func maxPolls(p model.PollPolicy, hint, retryAfter, d time.Duration) int {
	n, elapsed, prev := 1, time.Duration(0), time.Duration(0)
	for e := 1; ; e++ {
		prev = p.Next(model.PollInput{Previous: prev, ServerHint: hint, Errors: e, RetryAfter: retryAfter, Now: time.Now()})
		if elapsed += prev; elapsed > d {
			return n + 1
		}
		n++
	}
}

const faultTasks = 3

func TestFaultsOnTheWire(t *testing.T) {
	// Long enough for a stalled request (1 s timeout) and the reconnect
	// after it to fail on every task.
	faultFor := 2500 * time.Millisecond
	cases := []struct {
		f          fault
		errs       bool          // every task shows a poll error during the fault
		retryAfter time.Duration // the wait the server asked for
		frozen     bool          // the record must not be written during the fault
	}{
		{faultDrop, true, 0, true},
		{faultStall, true, 0, true},
		{faultSlow, false, 0, false},
		{fault500, true, 0, true},
		{fault502, true, 0, true},
		{fault503, true, 0, true},
		{fault429, true, time.Second, true},
		{fault503After, true, time.Second, true},
		{faultTruncate, true, 0, true},
		{faultBadJSON, true, 0, true},
		{faultBadStatus, true, 0, true},
		{faultBadResult, true, 0, true},
		{faultHugeMessage, false, 0, false},
		{faultFlap, false, 0, false},
	}
	var report strings.Builder
	fmt.Fprintf(&report, "%-30s %8s %10s %8s %8s %s\n", "fault ("+faultFor.String()+")", "polls", "reconnects", "bound", "min gap", "first error")
	for _, c := range cases {
		t.Run(strings.ReplaceAll(string(c.f), " ", "_"), func(t *testing.T) {
			base := runtime.NumGoroutine()
			e := newFaultEnv(t)
			ctx, cancel := context.WithTimeout(context.Background(), waitfor.Scale(60*time.Second))
			defer cancel()

			// 3 tasks of 1–2 s, started through the proxy while it is healthy.
			var ids []string
			for i := range faultTasks {
				rec, _, err := tupled(e.tracker.Call(ctx, callRequest{Server: e.ref, Tool: "sleep", Args: json.RawMessage(fmt.Sprintf(`{"seconds":%d}`, 20+10*i))}))
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, rec.ID)
			}
			before := map[string]*model.Task{}
			for _, id := range ids {
				before[id], _ = e.store.Get(id)
			}

			e.proxy.set(c.f)
			var mu sync.Mutex
			errSeen := map[string]error{}
			last := map[string]*model.Task{}
			watchDone := make(chan error, 1)
			go func() {
				watchDone <- follow(ctx, e.tracker, ids, func(res pollResult) bool {
					mu.Lock()
					defer mu.Unlock()
					if res.Err != nil && errSeen[res.Task.ID] == nil {
						errSeen[res.Task.ID] = res.Err
					}
					last[res.Task.ID] = res.Task
					return true
				})
			}()
			time.Sleep(faultFor)

			// During the fault: the error is on every task, and nothing
			// was written for a poll that only failed.
			polls := e.proxy.polls()
			var firstErr error
			for _, id := range ids {
				ps := e.tracker.pollStatus(id)
				mu.Lock()
				seen := errSeen[id]
				mu.Unlock()
				if firstErr == nil {
					firstErr = seen
				}
				if c.errs && (seen == nil || ps.LastError == nil || ps.Errors == 0) {
					t.Errorf("task %s: no error shown under %s (seen %v, pollStatus %+v)", id, c.f, seen, ps)
				}
				if c.frozen {
					now, err := e.store.Get(id)
					if err != nil {
						t.Fatal(err)
					}
					if !now.UpdatedAt.Equal(before[id].UpdatedAt) || len(now.History) != len(before[id].History) {
						t.Errorf("task %s was written during %s: %+v", id, c.f, now)
					}
				}
			}
			// A server that answered outside the protocol was reached: the
			// error says what was wrong with the answer instead.
			if answered := c.f == faultBadJSON || c.f == faultBadStatus || c.f == faultBadResult; answered && firstErr != nil {
				if msg := firstErr.Error(); strings.Contains(msg, "unreachable") || !strings.Contains(msg, "invalid response") {
					t.Errorf("under %s the error reads %q; want an invalid response, not an unreachable server", c.f, msg)
				}
			}
			if c.f == faultHugeMessage {
				for _, id := range ids {
					rec, _ := e.store.Get(id)
					if n := len(rec.StatusMessage); n > model.MaxStatusMessage+len("…") {
						t.Errorf("a %d-byte status message was stored", n)
					}
					for _, h := range rec.History {
						if len(h.Message) > model.MaxStatusMessage+len("…") {
							t.Errorf("a %d-byte status message went into the history", len(h.Message))
						}
					}
				}
			}

			// Backoff: count the polls that reached the proxy, and apart
			// the reconnects (a session go-sdk failed for good is dropped).
			total, reconnects, minGap := 0, len(polls[""]), time.Duration(0)
			for _, id := range ids {
				rec, _ := e.store.Get(id)
				times := polls[rec.TaskID]
				total += len(times)
				for i := 1; i < len(times); i++ {
					if gap := times[i].Sub(times[i-1]); minGap == 0 || gap < minGap {
						minGap = gap
					}
				}
			}
			bound := faultTasks * maxPolls(faultPolicy, 20*time.Millisecond, c.retryAfter, faultFor)
			if c.errs && total > bound {
				t.Errorf("%d polls reached the server in %s of %s; the policy allows at most %d", total, faultFor, c.f, bound)
			}
			if c.errs && total+reconnects < faultTasks {
				t.Errorf("only %d polls during %s: taskdeck stopped trying", total, c.f)
			}
			if c.retryAfter > 0 && minGap < c.retryAfter-50*time.Millisecond {
				t.Errorf("Retry-After %s not honoured: two polls of one task %s apart", c.retryAfter, minGap)
			}

			// The fault stops: every task finishes.
			e.proxy.set(faultNone)
			select {
			case err := <-watchDone:
				if err != nil {
					t.Fatalf("watch: %v", err)
				}
			case <-time.After(waitfor.Scale(30 * time.Second)):
				t.Fatalf("tasks did not finish within %v after %s stopped", waitfor.Scale(30*time.Second), c.f)
			}
			for _, id := range ids {
				rec, _ := e.store.Get(id)
				if rec.Status != model.StatusCompleted {
					t.Errorf("task %s ended %s after %s", id, rec.Status, c.f)
				}
			}
			e.close()
			if n := settleGoroutines(base); n > base {
				buf := make([]byte, 1<<20)
				t.Errorf("goroutines: %d before, %d after %s\n%s", base, n, c.f, buf[:runtime.Stack(buf, true)])
			}
			gap := "-"
			if minGap > 0 {
				gap = minGap.Round(time.Millisecond).String()
			}
			bnd := "-"
			if c.errs {
				bnd = fmt.Sprint(bound)
			}
			msg := "-"
			if firstErr != nil {
				msg = firstErr.Error()
				if len(msg) > 90 {
					msg = msg[:90] + "…"
				}
			}
			fmt.Fprintf(&report, "%-30s %8d %10d %8s %8s %s\n", c.f, total, reconnects, bnd, gap, msg)
		})
	}
	t.Log("\n" + report.String())
}
