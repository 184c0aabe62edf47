package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/internal/hostile"
	"github.com/taskdeck/taskdeck/internal/waitfor"
	mcpconfig "github.com/taskdeck/taskdeck/mcpclient/config"
	"github.com/taskdeck/taskdeck/mcpclient/wire"
	"github.com/taskdeck/taskdeck/model"
)

// BenchmarkPushVsPoll runs, side by side in each round (the order
// alternating), the same work against a loopback demo server with push
// and without: benchTasks hold tasks under the default policy, each
// stepped benchSteps times at random moments. It reports the time from
// the server's change (Server.OnChange) to the engine's feed event of the
// committed record, p50 and p99 over all rounds, and the requests the
// server received (tasks/get and subscriptions/listen) per task-hour; the
// log has each round's values for the ranges.
//
//	go test -run '^$' -bench PushVsPoll -benchtime 5x ./engine
func BenchmarkPushVsPoll(b *testing.B) {
	var push, poll trial
	for i := 0; b.Loop(); i++ {
		modes := []bool{true, false}
		if i%2 == 1 {
			modes = []bool{false, true}
		}
		for _, on := range modes {
			r := runTrial(b, on)
			b.Logf("round %d push=%v: p50 %v p99 %v, %.0f requests per task-hour", i+1, on, r.pct(50), r.pct(99), r.perHour())
			if on {
				push.add(r)
			} else {
				poll.add(r)
			}
		}
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(push.pct(50)), "push-p50-ms")
	b.ReportMetric(ms(push.pct(99)), "push-p99-ms")
	b.ReportMetric(ms(poll.pct(50)), "poll-p50-ms")
	b.ReportMetric(ms(poll.pct(99)), "poll-p99-ms")
	b.ReportMetric(push.perHour(), "push-req/task-h")
	b.ReportMetric(poll.perHour(), "poll-req/task-h")
	b.ReportMetric(poll.perHour()/push.perHour(), "x-fewer-req")
}

const (
	benchTasks    = 20
	benchSteps    = 4
	benchInterval = 500 * time.Millisecond // the demo's pollIntervalMs
)

type trial struct {
	lat       []time.Duration
	requests  int
	taskHours float64
}

func (t *trial) add(o trial) {
	t.lat = append(t.lat, o.lat...)
	t.requests += o.requests
	t.taskHours += o.taskHours
}

func (t *trial) pct(p int) time.Duration {
	if len(t.lat) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(t.lat))
	return s[min(len(s)*p/100, len(s)-1)]
}

func (t *trial) perHour() float64 { return float64(t.requests) / t.taskHours }

// runTrial is one mode's run: its own server, store and engine.
func runTrial(b *testing.B, push bool) trial {
	srv := hostile.Start(b, demo.Options{Hold: true, NoPush: !push, PollInterval: benchInterval, TTL: time.Hour})
	changes := onChanges(srv)
	cfg, err := mcpconfig.ParseConfig("bench.json", fmt.Appendf(nil, `{"mcpServers":{"demo":{"url":%q}}}`, srv.URL))
	if err != nil {
		b.Fatal(err)
	}
	e, err := Open(Options{DataDir: b.TempDir(), Config: cfg, Policy: model.DefaultPollPolicy})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f, err := e.Watch(ctx, 0)
	if err != nil {
		b.Fatal(err)
	}
	// The feed's reader: when each task's step (its index) was committed.
	var mu sync.Mutex
	seen := map[string][]time.Time{} // by task id: commit time per step reached
	go func() {
		for ev := range f.Events() {
			if ev.Kind != deck.EventChange {
				continue
			}
			now := time.Now()
			for _, en := range ev.Entries {
				tk := en.Task
				var i, n int
				switch {
				case tk.Status.Terminal():
					i = benchSteps
				case tk.TaskID == "":
					continue
				default:
					if _, err := fmt.Sscanf(tk.StatusMessage, "step %d of %d", &i, &n); err != nil {
						continue
					}
				}
				mu.Lock()
				for len(seen[tk.TaskID]) <= i {
					seen[tk.TaskID] = append(seen[tk.TaskID], now)
				}
				mu.Unlock()
			}
		}
	}()

	tasks := make([]*benchTask, benchTasks)
	for i := range tasks {
		res, err := e.Call(ctx, deck.CallRequest{Server: demoRef, Tool: demo.HoldTool, Args: fmt.Appendf(nil, `{"steps":%d}`, benchSteps)})
		if err != nil {
			b.Fatal(err)
		}
		tasks[i] = &benchTask{rec: res.Task, born: time.Now()}
	}
	// Measured with the stream up: the first listen waits for the calls'
	// lull, and a task that joins after it for the next.
	if push {
		waitfor.Within(b, time.Minute, "every task pushed", func() bool { return allPushed(ctx, e, tasks) })
	}
	var wg sync.WaitGroup
	for _, tk := range tasks {
		wg.Go(func() {
			for range benchSteps {
				// The workload: a change at a random moment.
				time.Sleep(200*time.Millisecond + rand.N(time.Second))
				_, n := changes.last(tk.rec.TaskID)
				if err := srv.Demo.Step(tk.rec.TaskID); err != nil {
					b.Error(err)
					return
				}
				// The change's moment is the server's: how soon it is seen
				// here does not matter.
				var at time.Time
				if !waitfor.Until(10*time.Second, time.Millisecond, func() bool {
					var m int
					at, m = changes.last(tk.rec.TaskID)
					return m > n
				}) {
					b.Error("the server did not step the task")
					return
				}
				tk.changed = append(tk.changed, at)
			}
		})
	}
	wg.Wait()
	var out trial
	for _, tk := range tasks {
		waitfor.Within(b, 30*time.Second, fmt.Sprintf("every step of task %s committed", tk.rec.ID), func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(seen[tk.rec.TaskID]) > benchSteps
		})
		mu.Lock()
		commits := seen[tk.rec.TaskID]
		mu.Unlock()
		for i, at := range tk.changed {
			out.lat = append(out.lat, commits[i+1].Sub(at))
		}
		out.taskHours += commits[benchSteps].Sub(tk.born).Hours()
	}
	// Every tasks/get and listen of the trial, from the first call on.
	out.requests = len(srv.Requests("tasks/get")) + len(srv.Requests(wire.MethodListen))
	return out
}

type benchTask struct {
	rec     *model.Task
	born    time.Time
	changed []time.Time
}

func allPushed(ctx context.Context, e *Engine, tasks []*benchTask) bool {
	for _, tk := range tasks {
		if en, err := e.Get(ctx, tk.rec.ID); err != nil || !en.Poll.Pushed {
			return false
		}
	}
	return true
}
