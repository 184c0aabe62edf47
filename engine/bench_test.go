package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/mcpclient"
	mcpconfig "github.com/taskdeck/taskdeck/mcpclient/config"
	"github.com/taskdeck/taskdeck/model"
)

// BenchmarkEnginePolls measures the polls per second one engine sustains
// (its run loop, schedule, store reads and feed, PerServer in flight)
// against a loopback demo server, and in the same run a bare loop of
// POSTs of the same tasks/get with the same concurrency. x-bare is the
// engine's rate over the bare one; the target is >= 0.8.
//
//	go test -run '^$' -bench EnginePolls -benchtime 5000x ./engine
func BenchmarkEnginePolls(b *testing.B) {
	var gets atomic.Int64
	srv, cfg, sent := demoKeepingFirstGet(b, demo.Options{PollInterval: time.Millisecond, TTL: time.Hour}, func() { gets.Add(1) })
	// No delay of our own: every task is due again as soon as it is
	// polled, so the slots, not the policy, bound the rate.
	tiny := model.PollPolicy{Default: time.Microsecond, Floor: time.Microsecond, Cap: time.Microsecond, Growth: 1}
	e, err := Open(Options{DataDir: b.TempDir(), Config: cfg, Policy: tiny})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { e.Close() })
	ctx := context.Background()
	var taskIDs []string
	var first string
	for i := range 100 { // approve waits for input: its polls change nothing
		res, err := e.Call(ctx, deck.CallRequest{Server: demoRef, Tool: "approve", Args: fmt.Appendf(nil, `{"action":"a%d"}`, i)})
		if err != nil {
			b.Fatal(err)
		}
		taskIDs = append(taskIDs, res.Task.TaskID)
		first = res.Task.ID
	}
	// One poll outside the loop records the tasks/get the bare loop repeats.
	if res, err := e.tracker.Poll(ctx, first); err != nil || res.Err != nil {
		b.Fatal(err, res.Err)
	}
	bodies := make([][]byte, len(taskIDs))
	for i, id := range taskIDs {
		if bodies[i], err = withTaskID(sent.body, id); err != nil {
			b.Fatal(err)
		}
	}
	tr := http.DefaultTransport.(*http.Transport).Clone() // as the engine's pool has it
	tr.MaxIdleConnsPerHost = 2 * mcpclient.DefaultPerServer
	client := &http.Client{Transport: tr}
	defer client.CloseIdleConnections()
	bareRun := func(n int) time.Duration {
		var next atomic.Int64
		var wg sync.WaitGroup
		start := time.Now()
		for range mcpclient.DefaultPerServer {
			wg.Go(func() {
				for k := next.Add(1); k <= int64(n); k = next.Add(1) {
					i := int(k) % len(taskIDs)
					if err := BarePost(client, srv.URL+"/mcp", sent.header, bodies[i], taskIDs[i]); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		return time.Since(start)
	}

	b.ResetTimer()
	// bare, engine, bare: the load of a shared machine moves; the bare
	// rate is the mean of the runs either side of the engine's.
	base := bareRun(b.N / 2)
	f, err := e.Watch(ctx, 0) // starts the loop; a watcher reads the feed, as the dashboard would
	if err != nil {
		b.Fatal(err)
	}
	go func() {
		for range f.Events() {
		}
	}()
	for from := gets.Load(); gets.Load() < from+int64(len(taskIDs)); { // past the reconcile
		time.Sleep(time.Millisecond)
	}
	start, from := time.Now(), gets.Load()
	for gets.Load() < from+int64(b.N) {
		time.Sleep(100 * time.Microsecond)
	}
	ours := time.Since(start)
	e.Close() // the bare loop has the machine to itself
	base += bareRun(b.N - b.N/2)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/ours.Seconds(), "polls/s")
	b.ReportMetric(float64(b.N)/base.Seconds(), "bare-polls/s")
	b.ReportMetric(base.Seconds()/ours.Seconds(), "x-bare")
}

// withTaskID is the recorded tasks/get body, asking about another task.
func withTaskID(body []byte, taskID string) ([]byte, error) {
	var msg map[string]json.RawMessage
	if err := json.Unmarshal(body, &msg); err != nil {
		return nil, err
	}
	var params map[string]json.RawMessage
	if err := json.Unmarshal(msg["params"], &params); err != nil {
		return nil, err
	}
	params["taskId"], _ = json.Marshal(taskID)
	msg["params"], _ = json.Marshal(params)
	return json.Marshal(msg)
}

// BarePost posts a tasks/get body with a plain client: the baseline of
// the poll benchmarks here and in the tracker's (package engine_test).
func BarePost(client *http.Client, url string, header http.Header, body []byte, taskID string) error {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	for k, v := range header {
		if k != "Content-Length" {
			req.Header[k] = v
		}
	}
	req.Header.Set("Mcp-Name", taskID)
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("bare POST: %s", resp.Status)
	}
	return nil
}

// firstGet is the first tasks/get a benchmark's demo server was sent, kept
// for the bare loop to repeat byte for byte.
type firstGet struct {
	mu     sync.Mutex
	header http.Header
	body   []byte
}

// demoKeepingFirstGet starts a loopback demo server that keeps its first
// tasks/get in the returned firstGet and calls onGet (if not nil) on
// each, and a config naming it "demo".
func demoKeepingFirstGet(b *testing.B, opts demo.Options, onGet func()) (*httptest.Server, *mcpconfig.Config, *firstGet) {
	first := &firstGet{}
	d := demo.New(opts)
	h := d.Handler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Method") == "tasks/get" {
			if onGet != nil {
				onGet()
			}
			first.mu.Lock()
			if first.body == nil {
				first.body, _ = io.ReadAll(r.Body)
				first.header = r.Header.Clone()
				r.Body = io.NopCloser(bytes.NewReader(first.body))
			}
			first.mu.Unlock()
		}
		h.ServeHTTP(w, r)
	}))
	b.Cleanup(func() { srv.Close(); d.Close() })
	cfg, err := mcpconfig.ParseConfig("bench.json", fmt.Appendf(nil, `{"mcpServers":{"demo":{"url":%q}}}`, srv.URL+"/mcp"))
	if err != nil {
		b.Fatal(err)
	}
	return srv, cfg, first
}
