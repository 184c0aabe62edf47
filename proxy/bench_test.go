package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/engine"
	"github.com/taskdeck/taskdeck/model"
)

// The benchmarks interleave the proxied and the direct request (and, for
// tools/call, the engine's own call and one fsync), round after round,
// and report each one's median and range in ms:
//
//	go test -run '^$' -bench . -benchtime 300x ./proxy
//
// Targets: proxied tools/call <= (direct + one sync) * 1.10; proxied
// tasks/get <= 1.15 * direct.

type samples []time.Duration

func (s samples) report(b *testing.B, name string) time.Duration {
	slices.Sort(s)
	med := s[len(s)/2]
	b.ReportMetric(ms(med), name+"-med-ms")
	b.ReportMetric(ms(s[0]), name+"-min-ms")
	b.ReportMetric(ms(s[len(s)-1]), name+"-max-ms")
	return med
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// counted is the demo server on loopback behind a front that only counts
// requests by method: the hostile front keeps every request, which a
// benchmark of thousands of them would pay for on both sides.
type counted struct {
	url  string
	demo *demo.Server
	mu   sync.Mutex
	n    map[string]int
}

func (c *counted) count(method string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[method]
}

// benchRig is the demo server (counted), the engine and the proxy.
func benchRig(b *testing.B, dopts demo.Options, tune ...func(*engine.Options)) (*rig, *counted) {
	b.Helper()
	c := &counted{demo: demo.New(dopts), n: map[string]int{}}
	h := c.demo.Handler()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ts := &httptest.Server{Listener: l, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		c.n[r.Header.Get("Mcp-Method")]++
		c.mu.Unlock()
		h.ServeHTTP(w, r)
	})}}
	ts.Start()
	b.Cleanup(func() { ts.Close(); c.demo.Close() })
	c.url = ts.URL + "/mcp"
	return startFront(b, fmt.Sprintf(`{"mcpServers":{"demo":{"url":%q}}}`, c.url), Options{}, tune...), c
}

// timed posts one request and fails the benchmark on an error answer.
func timed(b *testing.B, url, method, params, name string) time.Duration {
	start := time.Now()
	_, a := rpc(b, url, method, params, map[string]string{"Mcp-Name": name})
	d := time.Since(start)
	if a.Error != nil {
		b.Fatalf("%s: %s", method, a.Error.Message)
	}
	return d
}

func oneSync(b *testing.B, dir string) time.Duration {
	start := time.Now()
	f, err := os.CreateTemp(dir, "sync")
	if err != nil {
		b.Fatal(err)
	}
	f.Write(make([]byte, 512))
	err = f.Sync()
	f.Close()
	d := time.Since(start)
	if err != nil {
		b.Fatal(err)
	}
	return d
}

// BenchmarkToolsCall: a tools/call that creates a task, through the proxy
// (intent and handle committed before the handle is relayed), direct, and
// as taskdeck's own in-process engine.Call of the same tool (the same two
// commits without the proxy's HTTP hop), with one fsync timed alongside.
func BenchmarkToolsCall(b *testing.B) {
	r, srv := benchRig(b, demo.Options{Hold: true, PollInterval: time.Hour})
	m := metaJSON("bench", true)
	params := `{"name":"hold","arguments":{"steps":1},"_meta":` + m + `}`
	req := deck.CallRequest{Server: model.ServerRef{Name: "demo"}, Tool: "hold", Args: json.RawMessage(`{"steps":1}`), Agent: "bench"}
	dir := b.TempDir()
	var direct, proxied, engineCall, syncs samples
	for b.Loop() {
		direct = append(direct, timed(b, srv.url, "tools/call", params, "hold"))
		proxied = append(proxied, timed(b, r.url, "tools/call", params, "hold"))
		start := time.Now()
		if res, err := r.eng.Call(context.Background(), req); err != nil || res.Task.TaskID == "" {
			b.Fatalf("engine.Call: %v %+v", err, res.Task)
		}
		engineCall = append(engineCall, time.Since(start))
		syncs = append(syncs, oneSync(b, dir))
	}
	d, p, e, s := direct.report(b, "direct"), proxied.report(b, "proxied"), engineCall.report(b, "engine"), syncs.report(b, "sync")
	b.ReportMetric(float64(p)/float64(d+s), "proxied/(direct+sync)")
	b.ReportMetric(float64(p)/float64(d+2*s), "proxied/(direct+2sync)")
	b.ReportMetric(float64(p)/float64(e), "proxied/engine")
	b.ReportMetric(float64(e)/float64(d+2*s), "engine/(direct+2sync)")
}

// BenchmarkTasksGet: tasks/get through the proxy and direct. "fresh": the
// server's pollIntervalMs has not passed since the last poll, so the
// proxy answers from the record; "poll": it has, so the proxy has the
// engine poll the server and answers with that poll.
func BenchmarkTasksGet(b *testing.B) {
	for _, c := range []struct {
		name     string
		interval time.Duration
	}{{"fresh", time.Hour}, {"poll", time.Millisecond}} {
		b.Run(c.name, func(b *testing.B) {
			r, srv := benchRig(b, demo.Options{Hold: true, NoPush: true, PollInterval: c.interval}, quietEngine)
			m := metaJSON("bench", true)
			_, a := rpc(b, r.url, "tools/call", `{"name":"hold","arguments":{"steps":1},"_meta":`+m+`}`, nil)
			id := str(a.Result["taskId"])
			e, err := r.eng.Get(context.Background(), id)
			if err != nil {
				b.Fatal(err)
			}
			directParams := fmt.Sprintf(`{"taskId":%q,"_meta":%s}`, e.Task.TaskID, m)
			proxiedParams := fmt.Sprintf(`{"taskId":%q,"_meta":%s}`, id, m)
			polls := srv.count("tasks/get")
			var direct, proxied, polled samples
			for b.Loop() {
				direct = append(direct, timed(b, srv.url, "tasks/get", directParams, e.Task.TaskID))
				before := srv.count("tasks/get")
				d := timed(b, r.url, "tasks/get", proxiedParams, id)
				proxied = append(proxied, d)
				if srv.count("tasks/get") > before {
					polled = append(polled, d) // this answer waited for a server poll
				}
			}
			d, p := direct.report(b, "direct"), proxied.report(b, "proxied")
			b.ReportMetric(float64(p)/float64(d), "proxied/direct")
			if len(polled) >= 10 { // enough to have a median
				b.ReportMetric(float64(polled.report(b, "polled"))/float64(d), "polled/direct")
			}
			b.ReportMetric(float64(srv.count("tasks/get")-polls-len(direct)), "server-polls-by-proxy")
		})
	}
}

// BenchmarkAgentPolls: an agent that polls one task as the server asks,
// every pollIntervalMs, through the proxy and direct, round after round;
// the task moves on every fifth round. With push off the proxy answers
// from the record when the engine polled less than pollIntervalMs ago and
// polls the server otherwise; with push on the record is current. The
// engine watches the task as serve does; the server's interval is the
// demo's 500 ms (an engine never polls faster than its 250 ms floor, so a
// shorter one would leave every agent poll to find the record too old):
//
//	go test -run '^$' -bench AgentPolls -benchtime 60x ./proxy
func BenchmarkAgentPolls(b *testing.B) {
	const interval = 500 * time.Millisecond
	for _, push := range []bool{false, true} {
		b.Run(map[bool]string{false: "push-off", true: "push-on"}[push], func(b *testing.B) {
			r, srv := benchRig(b, demo.Options{Hold: true, NoPush: !push, PollInterval: interval})
			m := metaJSON("bench", true)
			_, a := rpc(b, r.url, "tools/call", `{"name":"hold","arguments":{"steps":10000},"_meta":`+m+`}`, nil)
			id := str(a.Result["taskId"])
			e, err := r.eng.Get(context.Background(), id)
			if err != nil {
				b.Fatal(err)
			}
			if push {
				until(b, "the server pushes the task", func() bool {
					e, err := r.eng.Get(context.Background(), id)
					return err == nil && e.Poll.Pushed
				})
			}
			directParams := fmt.Sprintf(`{"taskId":%q,"_meta":%s}`, e.Task.TaskID, m)
			proxiedParams := fmt.Sprintf(`{"taskId":%q,"_meta":%s}`, id, m)
			var direct, proxied, polled samples
			round := 0
			for b.Loop() {
				if round++; round%5 == 0 {
					if err := srv.demo.Step(e.Task.TaskID); err != nil {
						b.Fatal(err)
					}
				}
				time.Sleep(interval) // the agent's pace: pollIntervalMs between its polls
				direct = append(direct, timed(b, srv.url, "tasks/get", directParams, e.Task.TaskID))
				before := srv.count("tasks/get")
				d := timed(b, r.url, "tasks/get", proxiedParams, id)
				proxied = append(proxied, d)
				if srv.count("tasks/get") > before {
					polled = append(polled, d)
				}
			}
			d, p := direct.report(b, "direct"), proxied.report(b, "proxied")
			b.ReportMetric(float64(p)/float64(d), "proxied/direct")
			b.ReportMetric(float64(len(proxied)-len(polled))/float64(len(proxied)), "from-record")
		})
	}
}
