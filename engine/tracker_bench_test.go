package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/mcpclient"
	mcpconfig "github.com/taskdeck/taskdeck/mcpclient/config"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store/badger"
)

// benchEnv is a tracker over a real store with open tasks on a demo server
// on loopback. The server records the first tasks/get it sees, so a bare
// POST can repeat it byte for byte.
type benchEnv struct {
	srv     *httptest.Server
	tracker *tracker
	ids     []string
	taskIDs []string
	first   *firstGet
}

func newBenchEnv(b *testing.B, tasks int) *benchEnv {
	b.Helper()
	e := &benchEnv{}
	var cfg *mcpconfig.Config
	e.srv, cfg, e.first = demoKeepingFirstGet(b, demo.Options{PollInterval: time.Second, TTL: time.Hour}, nil)
	st, err := badger.Open(b.TempDir(), nil)
	if err != nil {
		b.Fatal(err)
	}
	pool := mcpclient.NewPool(mcpclient.PoolOptions{Config: cfg})
	e.tracker = newTracker(st, pool, trackerOptions{})
	b.Cleanup(func() {
		pool.Close()
		st.Close()
	})
	for i := range tasks {
		rec, _, err := tupled(e.tracker.Call(context.Background(), callRequest{
			Server: model.ServerRef{Name: "demo"}, Tool: "approve", Args: json.RawMessage(fmt.Sprintf(`{"action":"a%d"}`, i))}))
		if err != nil {
			b.Fatal(err)
		}
		e.ids, e.taskIDs = append(e.ids, rec.ID), append(e.taskIDs, rec.TaskID)
	}
	if res, err := e.tracker.Poll(context.Background(), e.ids[0]); err != nil || res.Err != nil {
		b.Fatal(err, res.Err)
	}
	return e
}

// bare posts the recorded tasks/get for task i with a plain http.Client.
func (e *benchEnv) bare(client *http.Client, i int) error {
	id := e.taskIDs[i%len(e.taskIDs)]
	body := bytes.Replace(e.first.body, []byte(e.first.header.Get("Mcp-Name")), []byte(id), 1)
	return BarePost(client, e.srv.URL+"/mcp", e.first.header, body, id)
}

func (e *benchEnv) poll(i int) error {
	res, err := e.tracker.Poll(context.Background(), e.ids[i%len(e.ids)])
	if err == nil {
		err = res.Err
	}
	return err
}

// BenchmarkPoll times tracker.Poll (store read, tasks/get through go-sdk,
// apply, no write) and, in the same run, a bare POST of the same tasks/get
// body. x-bare is the ratio of the two; the target is ≤ 1.2.
func BenchmarkPoll(b *testing.B) {
	e := newBenchEnv(b, 100)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	defer client.CloseIdleConnections()
	for _, inFlight := range []int{1, mcpclient.DefaultPerServer} {
		b.Run(fmt.Sprintf("inflight=%d", inFlight), func(b *testing.B) {
			run := func(n int, f func(int) error) time.Duration {
				var wg sync.WaitGroup
				var next sync.Mutex
				i := 0
				start := time.Now()
				for range inFlight {
					wg.Go(func() {
						for {
							next.Lock()
							k := i
							i++
							next.Unlock()
							if k >= n {
								return
							}
							if err := f(k); err != nil {
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
			ours := run(b.N, e.poll)
			b.StopTimer()
			base := run(b.N, func(i int) error { return e.bare(client, i) })
			b.ReportMetric(float64(base.Nanoseconds())/float64(b.N), "bare-ns/op")
			b.ReportMetric(float64(ours)/float64(base), "x-bare")
		})
	}
}
