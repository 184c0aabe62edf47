package proxy

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/demo"
)

// The benchmarks interleave the proxied and the direct request (and, for
// tools/call, one fsync, the cost a durable handle must add), round after
// round, and report each one's median and range in ms:
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
// (intent and handle committed before the handle is relayed) and direct.
func BenchmarkToolsCall(b *testing.B) {
	r := startRig(b, demo.Options{Hold: true, PollInterval: time.Hour}, Options{})
	m := metaJSON("bench", true)
	params := `{"name":"hold","arguments":{"steps":1},"_meta":` + m + `}`
	dir := b.TempDir()
	var direct, proxied, syncs samples
	for b.Loop() {
		direct = append(direct, timed(b, r.srv.URL, "tools/call", params, "hold"))
		proxied = append(proxied, timed(b, r.url, "tools/call", params, "hold"))
		syncs = append(syncs, oneSync(b, dir))
	}
	d, p, s := direct.report(b, "direct"), proxied.report(b, "proxied"), syncs.report(b, "sync")
	b.ReportMetric(float64(p)/float64(d+s), "proxied/(direct+sync)")
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
			r := startRig(b, demo.Options{Hold: true, PollInterval: c.interval}, Options{})
			m := metaJSON("bench", true)
			_, a := rpc(b, r.url, "tools/call", `{"name":"hold","arguments":{"steps":1},"_meta":`+m+`}`, nil)
			id := str(a.Result["taskId"])
			e, err := r.eng.Get(context.Background(), id)
			if err != nil {
				b.Fatal(err)
			}
			directParams := fmt.Sprintf(`{"taskId":%q,"_meta":%s}`, e.Task.TaskID, m)
			proxiedParams := fmt.Sprintf(`{"taskId":%q,"_meta":%s}`, id, m)
			polls := len(r.srv.Requests("tasks/get"))
			var direct, proxied, polled samples
			for b.Loop() {
				direct = append(direct, timed(b, r.srv.URL, "tasks/get", directParams, e.Task.TaskID))
				before := len(r.srv.Requests("tasks/get"))
				d := timed(b, r.url, "tasks/get", proxiedParams, id)
				proxied = append(proxied, d)
				if len(r.srv.Requests("tasks/get")) > before {
					polled = append(polled, d) // this answer waited for a server poll
				}
			}
			d, p := direct.report(b, "direct"), proxied.report(b, "proxied")
			b.ReportMetric(float64(p)/float64(d), "proxied/direct")
			if len(polled) >= 10 { // enough to have a median
				b.ReportMetric(float64(polled.report(b, "polled"))/float64(d), "polled/direct")
			}
			b.ReportMetric(float64(len(r.srv.Requests("tasks/get"))-polls-len(direct)), "server-polls-by-proxy")
		})
	}
}
