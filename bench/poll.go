package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"time"

	"github.com/taskdeck/taskdeck/deck"

	"github.com/taskdeck/taskdeck/engine"
	"github.com/taskdeck/taskdeck/mcpclient"
	mcpconfig "github.com/taskdeck/taskdeck/mcpclient/config"
	"github.com/taskdeck/taskdeck/model"
)

// pollEnv is a Deck over a real store, with N open tasks on a demo
// server in a child process.
type pollEnv struct {
	srv     *child
	url     string
	deck    deck.Deck // nil while a design owns the store
	ids     []string
	taskIDs []string
	// What the decks are opened with.
	dir    string
	conf   *mcpconfig.Config
	policy model.PollPolicy
}

func (e *pollEnv) close() {
	e.closeDeck()
	if e.srv != nil {
		e.srv.stop()
	}
}

// open opens an engine over the store; its loop does not run until it
// is watched, so that PollNow polls only the tasks it is given.
func (e *pollEnv) open() (deck.Deck, error) {
	return engine.Open(engine.Options{DataDir: e.dir, Config: e.conf, Policy: e.policy})
}

// openDeck opens the deck the one-task designs poll through.
func (e *pollEnv) openDeck() error {
	d, err := e.open()
	e.deck = d
	return err
}

// closeDeck closes it, so that another engine may own the store.
func (e *pollEnv) closeDeck() {
	if e.deck != nil {
		_ = e.deck.Close()
	}
	e.deck = nil
}

// polled is one poll as the steady-state designs count it.
type polled struct {
	id      string // "": no task (a failure to start)
	changed bool
	err     error
}

func newPollEnv(cfg config) (*pollEnv, error) {
	e := &pollEnv{}
	var err error
	if e.srv, e.url, err = startServer(cfg.interval); err != nil {
		return nil, err
	}
	e.dir = filepath.Join(cfg.tmp, "poll-store")
	if e.conf, err = mcpconfig.ParseConfig("bench.json", fmt.Appendf(nil, `{"mcpServers":{"demo":{"url":%q}}}`, e.url)); err != nil {
		e.close()
		return nil, err
	}
	// A fixed interval (the server's hint), so that the offered load is
	// N/interval polls per second throughout.
	e.policy = model.PollPolicy{Default: cfg.interval, Floor: cfg.interval, Cap: cfg.interval, Growth: 1, Jitter: 0.1}
	if err = e.openDeck(); err != nil {
		e.close()
		return nil, err
	}

	// Open N tasks that stay open: approve waits for an answer.
	ids := make([]string, cfg.tasks)
	taskIDs := make([]string, cfg.tasks)
	var next atomic.Int64
	var firstErr error
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	for range 32 {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= cfg.tasks {
					return
				}
				res, err := e.deck.Call(context.Background(), deck.CallRequest{
					Server: model.ServerRef{Name: "demo"}, Tool: "approve",
					Args: json.RawMessage(fmt.Sprintf(`{"action":"deploy build %d"}`, i)),
				})
				rec := res.Task
				if err == nil && !rec.Status.Pollable() {
					err = fmt.Errorf("task %s is %s, not open", rec.ID, rec.Status)
				}
				if err != nil {
					mu.Lock()
					firstErr = err
					mu.Unlock()
					return
				}
				ids[i], taskIDs[i] = rec.ID, rec.TaskID
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		e.close()
		return nil, firstErr
	}
	logf("poll: %d tasks opened in %v", cfg.tasks, time.Since(start).Round(time.Millisecond))
	e.ids, e.taskIDs = ids, taskIDs
	// Each task's first poll finds it waiting for its answer and writes
	// that question: one write per task, not the steady state. Done here,
	// those writes (and the memtable flushes and compactions they start)
	// fall in no measured run; every poll measured below changes nothing.
	start = time.Now()
	if err := e.pollAll(); err != nil {
		e.close()
		return nil, err
	}
	logf("poll: %d tasks polled once in %v", cfg.tasks, time.Since(start).Round(time.Millisecond))
	return e, nil
}

// pollAll polls every task once, 8 at a time, until each one holds the
// question its server asks (approve's only state change while open).
func (e *pollEnv) pollAll() error {
	var next atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	for range mcpclient.DefaultPerServer {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(e.ids) {
					return
				}
				if err := e.pollUntilAsked(e.ids[i]); err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if v := firstErr.Load(); v != nil {
		return v.(error)
	}
	return nil
}

// pollUntilAsked polls a task until it holds its question, which the
// server asks just after the call: within 100 polls, each a round trip.
func (e *pollEnv) pollUntilAsked(id string) error {
	ctx := context.Background()
	for range 100 {
		if err := e.deck.PollNow(ctx, []string{id}); err != nil {
			return err
		}
		rec, err := e.deck.Get(ctx, id)
		if err != nil || rec.Task.Status == model.StatusInputRequired {
			return err
		}
	}
	return fmt.Errorf("task %s is not %s after 100 polls", id, model.StatusInputRequired)
}

// capturedPost is one tasks/get exactly as taskdeck sends it.
type capturedPost struct {
	header http.Header
	body   []byte
}

// capture sends one tasks/get through a recording proxy on loopback.
func (e *pollEnv) capture() (*capturedPost, error) {
	target, _ := url.Parse(e.url)
	var got *capturedPost
	var mu sync.Mutex
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Header.Get("Mcp-Method") == "tasks/get" {
			mu.Lock()
			got = &capturedPost{header: r.Header.Clone(), body: body}
			mu.Unlock()
		}
		req, _ := http.NewRequestWithContext(r.Context(), r.Method, target.String(), bytes.NewReader(body))
		req.Header = r.Header.Clone()
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	}))
	defer proxy.Close()
	conf, _ := mcpconfig.ParseConfig("p.json", fmt.Appendf(nil, `{"mcpServers":{"p":{"url":%q}}}`, proxy.URL+"/mcp"))
	pool := mcpclient.NewPool(mcpclient.PoolOptions{Config: conf})
	defer pool.Close()
	sess, err := pool.Session(context.Background(), model.ServerRef{Name: "p"})
	if err != nil {
		return nil, err
	}
	if _, err := sess.GetTask(context.Background(), e.taskIDs[0]); err != nil {
		return nil, err
	}
	mu.Lock()
	defer mu.Unlock()
	if got == nil {
		return nil, fmt.Errorf("no tasks/get seen")
	}
	return got, nil
}

// bareClient posts a captured tasks/get for any task id: the least a
// poll can cost over HTTP.
type bareClient struct {
	url    string
	cp     *capturedPost
	client *http.Client
}

func (b *bareClient) post(taskID string) error {
	body := bytes.Replace(b.cp.body, []byte(b.cp.header.Get("Mcp-Name")), []byte(taskID), 1)
	req, err := http.NewRequest(http.MethodPost, b.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	for k, v := range b.cp.header {
		if k != "Content-Length" {
			req.Header[k] = v
		}
	}
	req.Header.Set("Mcp-Name", taskID)
	resp, err := b.client.Do(req)
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("bare POST: %s", resp.Status)
	}
	return err
}

// overheadRun polls n times with c in flight and returns the wall time and
// the client's and server's CPU time per poll.
func overheadRun(e *pollEnv, c, n int, poll func(i int) error) (wall, cpu, srvCPU float64, err error) {
	var next atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	c0, s0, t0 := cpuTime(), procCPU(e.srv.cmd.Process.Pid), time.Now()
	for range c {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := poll(i); err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
			}
		})
	}
	wg.Wait()
	el := time.Since(t0)
	c1, s1 := cpuTime(), procCPU(e.srv.cmd.Process.Pid)
	if v := firstErr.Load(); v != nil {
		return 0, 0, 0, v.(error)
	}
	return el.Seconds() / float64(n), (c1 - c0).Seconds() / float64(n), (s1 - s0).Seconds() / float64(n), nil
}

// steady is one design's steady state with every task open.
type steady struct {
	pollsPerSec, cpuPerPoll, memPerTask, rssPerTask float64
	// gap is the median time between two polls of one task, over the
	// polls in the window: the rate a design keeps, which polls/s in a
	// window of fixed length only samples.
	gap                           float64
	maxGoroutines, baseGoroutines int
	changed, polls, errs          int64
	writeBytes                    int64
}

// steadyRun runs a polling design for warm+window and measures the window.
// run must poll until ctx ends, calling count after every poll.
func steadyRun(cfg config, warm, window time.Duration, run func(ctx context.Context, count func(polled))) steady {
	var st steady
	// Sized up front, so that they do not count as the design's memory.
	lastPoll := make(map[string]time.Time, cfg.tasks)
	gaps := make([]float64, 0, 4*cfg.tasks)
	var gapMu sync.Mutex
	var measuring atomic.Bool
	baseMem, baseRSS := goMem(), rss()
	dumpProfiles(cfg, "base")
	st.baseGoroutines = runtime.NumGoroutine()
	var polls, changed, errs atomic.Int64
	count := func(p polled) {
		polls.Add(1)
		if p.changed {
			changed.Add(1)
		}
		if p.err != nil {
			errs.Add(1)
		}
		if p.id != "" {
			now := time.Now()
			gapMu.Lock()
			if last, ok := lastPoll[p.id]; ok && measuring.Load() && len(gaps) < cap(gaps) {
				gaps = append(gaps, now.Sub(last).Seconds())
			}
			lastPoll[p.id] = now
			gapMu.Unlock()
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); run(ctx, count) }()
	time.Sleep(warm)
	measuring.Store(true)
	p0, ch0, e0, c0, w0, t0 := polls.Load(), changed.Load(), errs.Load(), cpuTime(), writeBytes(), time.Now()
	maxG := 0
	for time.Since(t0) < window {
		maxG = max(maxG, runtime.NumGoroutine())
		time.Sleep(50 * time.Millisecond)
	}
	p1, ch1, e1, c1, w1, el := polls.Load(), changed.Load(), errs.Load(), cpuTime(), writeBytes(), time.Since(t0)
	measuring.Store(false)
	// Memory in the steady state, with everything still running.
	st.memPerTask = float64(goMem()-baseMem) / float64(cfg.tasks)
	st.rssPerTask = float64(rss()-baseRSS) / float64(cfg.tasks)
	dumpProfiles(cfg, "steady")
	cancel()
	<-done
	gapMu.Lock()
	st.gap = median(gaps)
	gapMu.Unlock()
	st.polls, st.changed, st.errs = p1-p0, ch1-ch0, e1-e0
	st.pollsPerSec = float64(st.polls) / el.Seconds()
	if st.polls > 0 {
		st.cpuPerPoll = (c1 - c0).Seconds() / float64(st.polls)
	}
	st.maxGoroutines = maxG - st.baseGoroutines
	st.writeBytes = w1 - w0
	// Let the stopped design's goroutines end before the next one starts.
	for deadline := time.Now().Add(10 * time.Second); runtime.NumGoroutine() > st.baseGoroutines+2 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	return st
}

// ours is taskdeck's design: the engine's loop (one schedule, PerServer
// in flight), which owns the store while it runs. Each poll is an event
// of its feed: a change, or only the poll state moved.
func (e *pollEnv) ours(ctx context.Context, count func(polled)) {
	e.closeDeck()
	defer func() {
		if err := e.openDeck(); err != nil {
			count(polled{err: err})
		}
	}()
	eng, err := e.open()
	if err != nil {
		count(polled{err: err})
		return
	}
	defer eng.Close()
	feed, err := eng.Watch(ctx, 0)
	if err != nil {
		count(polled{err: err})
		return
	}
	for ev := range feed.Events() {
		if ev.Kind != deck.EventChange && ev.Kind != deck.EventPoll {
			continue
		}
		for _, en := range ev.Entries {
			p := polled{id: en.Task.ID, changed: ev.Kind == deck.EventChange}
			if en.Poll.Errors > 0 {
				p.err = errors.New(en.Poll.LastError)
			}
			count(p)
		}
	}
}

// naive is the obvious design: a goroutine per task that polls it
// (PollNow) and sleeps the interval, with the policy's jitter. Start times
// are spread over one interval; without that, all N polls would go out at
// once and open N connections. Whether a poll changed the record is not
// known to it (a change is not expected: the tasks wait for an answer).
func (e *pollEnv) naive(interval time.Duration) func(ctx context.Context, count func(polled)) {
	return func(ctx context.Context, count func(polled)) {
		var wg sync.WaitGroup
		for _, id := range e.ids {
			wg.Go(func() {
				delay := time.Duration(rand.Int64N(int64(interval)))
				for {
					select {
					case <-ctx.Done():
						return
					case <-time.After(delay):
					}
					err := e.deck.PollNow(ctx, []string{id})
					if ctx.Err() != nil {
						return
					}
					count(polled{id: id, err: err})
					delay = time.Duration(float64(interval) * (1 + e.policy.Jitter*rand.Float64()))
				}
			})
		}
		wg.Wait()
	}
}

func benchPoll(cfg config) (string, []finding) {
	e, err := newPollEnv(cfg)
	if err != nil {
		return fmt.Sprintf("\npoll benchmark failed: %v\n", err), []finding{{"2. polling", false, err.Error()}}
	}
	defer e.close()
	var out string
	var found []finding

	// 2a. One task's poll through the Deck against a bare POST of the
	// same tasks/get body.
	cp, err := e.capture()
	if err != nil {
		return fmt.Sprintf("\ncapture failed: %v\n", err), nil
	}
	bare := &bareClient{url: e.url, cp: cp, client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
	defer bare.client.CloseIdleConnections()
	nOver := 2000
	if cfg.quick {
		nOver = 500
	}
	type design struct {
		name string
		poll func(i int) error
	}
	designs := []design{
		{"bare HTTP POST of the same tasks/get", func(i int) error { return bare.post(e.taskIDs[i%len(e.taskIDs)]) }},
		{"Deck.PollNow of one task (store read, tasks/get, apply)", func(i int) error {
			return e.deck.PollNow(context.Background(), []string{e.ids[i%len(e.ids)]})
		}},
	}
	for _, c := range []int{1, mcpclient.DefaultPerServer} {
		wall := make([][]float64, len(designs))
		cpu := make([][]float64, len(designs))
		srv := make([][]float64, len(designs))
		for round := range cfg.rounds {
			for k := range designs {
				i := (k + round) % len(designs)
				w, cp, s, err := overheadRun(e, c, nOver, designs[i].poll)
				if err != nil {
					logf("poll overhead %s: %v", designs[i].name, err)
					continue
				}
				wall[i], cpu[i], srv[i] = append(wall[i], w), append(cpu[i], cp), append(srv[i], s)
			}
		}
		t := &table{head: []string{"design", "in flight", "wall per poll", "polls/s", "client CPU per poll", "server CPU per poll", "wall vs bare", "client CPU vs bare"}}
		for i, d := range designs {
			w := median(wall[i])
			t.add(d.name, fmt.Sprint(c), dur(w), fmt.Sprintf("%.0f", 1/w), dur(median(cpu[i])), dur(median(srv[i])),
				ratio(w, median(wall[0])), ratio(median(cpu[i]), median(cpu[0])))
		}
		out += fmt.Sprintf("\nPoll cost, %d polls per run, %d runs, demo server in a child process on loopback (lower is better):\n\n%s", nOver, cfg.rounds, t)
		r := median(wall[1]) / median(wall[0])
		found = append(found, finding{fmt.Sprintf("2.1 Deck.PollNow of one task ≤ 1.2× a bare POST per poll (%d in flight, wall)", c), r <= 1.2,
			fmt.Sprintf("%.2f× (%s vs %s); client CPU %.2f×", r, dur(median(wall[1])), dur(median(wall[0])), median(cpu[1])/median(cpu[0]))})
	}

	// 2b and 3. Steady state with every task open.
	// Warm-up: one interval (the naive design spreads its first polls over
	// it) plus the time ours takes to drain the first burst of N due polls.
	// The window is one whole interval: ours polls every task in a burst
	// at start, and a shorter window would count a phase of that rhythm,
	// not its rate.
	warm, window, rounds := cfg.interval+5*time.Second, cfg.interval, 3
	if cfg.quick {
		warm, window, rounds = 2*cfg.interval, 2*cfg.interval, 2
	}
	names := []string{"taskdeck engine (one schedule, 8 in flight)", "naive: goroutine per task, poll then sleep"}
	runs := []func(context.Context, func(polled)){e.ours, e.naive(cfg.interval)}
	res := make([][]steady, 2)
	for round := range rounds {
		for k := range runs {
			i := (k + round) % len(runs)
			// A deck opened anew holds no connection yet: the
			// baseline counts none that the run (ours closes it) drops.
			e.closeDeck()
			if err := e.openDeck(); err != nil {
				return out + fmt.Sprintf("\n%v\n", err), found
			}
			res[i] = append(res[i], steadyRun(cfg, warm, window, runs[i]))
		}
	}
	pick := func(i int, f func(steady) float64) float64 {
		var xs []float64
		for _, s := range res[i] {
			xs = append(xs, f(s))
		}
		return median(xs)
	}
	t := &table{head: []string{"design", "polls/s in the window (at the hint)", "time between a task's polls (median)", "CPU per poll", "Go heap+stacks per open task", "RSS per open task", "extra goroutines (max)", "failed polls", "CPU vs taskdeck", "memory vs taskdeck"}}
	for i, name := range names {
		t.add(name, fmt.Sprintf("%.0f (%.0f)", pick(i, func(s steady) float64 { return s.pollsPerSec }), float64(cfg.tasks)/cfg.interval.Seconds()),
			fmt.Sprintf("%.2f s", pick(i, func(s steady) float64 { return s.gap })),
			dur(pick(i, func(s steady) float64 { return s.cpuPerPoll })),
			bytesStr(pick(i, func(s steady) float64 { return s.memPerTask })),
			bytesStr(pick(i, func(s steady) float64 { return s.rssPerTask })),
			fmt.Sprintf("%.0f", pick(i, func(s steady) float64 { return float64(s.maxGoroutines) })),
			fmt.Sprintf("%.0f", pick(i, func(s steady) float64 { return float64(s.errs) })),
			ratio(pick(i, func(s steady) float64 { return s.cpuPerPoll }), pick(0, func(s steady) float64 { return s.cpuPerPoll })),
			ratio(pick(i, func(s steady) float64 { return s.memPerTask }), pick(0, func(s steady) float64 { return s.memPerTask })))
	}
	out += fmt.Sprintf("\nSteady state: %d open tasks, each polled every %v (+≤10%% jitter); %v warm-up, %v measured, %d runs each, alternating. "+
		"Memory is the growth over the process before the design started (the store and its records already open), divided by the tasks.\n\n%s",
		cfg.tasks, cfg.interval, warm, window, rounds, t)
	mem := pick(0, func(s steady) float64 { return s.memPerTask })
	found = append(found, finding{"2.2 ≤ 2 KiB memory per open task (Go heap+stacks, steady state)", mem <= 2048, bytesStr(mem)})
	g := pick(0, func(s steady) float64 { return float64(s.maxGoroutines) })
	// Per slot: the poll goroutine and its HTTP connection's read and write loops.
	found = append(found, finding{"2.3 goroutines bounded by the in-flight limit (≤ 3 per slot + 4)", g <= 3*float64(mcpclient.DefaultPerServer)+4,
		fmt.Sprintf("%.0f extra goroutines at most (limit %d in flight; naive: %.0f)", g, mcpclient.DefaultPerServer, pick(1, func(s steady) float64 { return float64(s.maxGoroutines) }))})

	// 3. Write amplification of polls that changed nothing.
	var polls, changed, wb int64
	for _, s := range res[0] {
		polls += s.polls
		changed += s.changed
		wb += s.writeBytes
	}
	t3 := &table{head: []string{"design", "polls measured", "polls that changed the record", "bytes written (/proc/self/io write_bytes)", "bytes per unchanged poll"}}
	for i, name := range names {
		var p, c, w int64
		for _, s := range res[i] {
			p, c, w = p+s.polls, c+s.changed, w+s.writeBytes
		}
		t3.add(name, fmt.Sprint(p), fmt.Sprint(c), fmt.Sprint(w), fmt.Sprintf("%.2f", float64(w)/float64(max(p-c, 1))))
	}
	out += fmt.Sprintf("\nWrite amplification: bytes this process wrote to storage during the measured windows above "+
		"(write_bytes counts pages dirtied, mmap writes included; the demo server is another process):\n\n%s", t3)
	found = append(found, finding{"3. zero bytes written per poll that changed nothing", changed == 0 && wb == 0,
		fmt.Sprintf("%d bytes over %d polls (%d changed)", wb, polls, changed)})
	return out, found
}

// dumpProfiles writes the heap (every allocation still held, after a GC)
// and goroutine profiles into cfg.profiles, numbered in the order taken.
func dumpProfiles(cfg config, tag string) {
	if cfg.profiles == "" {
		return
	}
	runtime.GC()
	n := dumpN.Add(1)
	for _, p := range []string{"heap", "goroutine"} {
		f, err := os.Create(filepath.Join(cfg.profiles, fmt.Sprintf("%02d-%s.%s", n, tag, p)))
		if err != nil {
			logf("%v", err)
			return
		}
		// debug 1: the goroutines grouped by stack, as text.
		_ = pprof.Lookup(p).WriteTo(f, map[string]int{"goroutine": 1}[p])
		f.Close()
	}
}

var dumpN atomic.Int64
