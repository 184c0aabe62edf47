package engine

import (
	"context"
	"fmt"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/internal/cputime"
	"github.com/taskdeck/taskdeck/internal/pgtest"
	"github.com/taskdeck/taskdeck/internal/waitfor"
	mcpconfig "github.com/taskdeck/taskdeck/mcpclient/config"
	"github.com/taskdeck/taskdeck/model"
)

// BenchmarkFleetPolls measures the polls per second that 1, 2 and 3
// engines on one PostgreSQL database sustain between them, against one
// loopback demo server (pollIntervalMs 1) with 60 open tasks waiting for
// input (their polls change nothing). Each round (one iteration) runs the
// three fleet sizes in an order that turns each round: the claims are
// cleared, as if every lease ran out, k engines open, claim their shares
// and poll as fast as their slots allow; the server counts the tasks/get
// of a 2 s window once every task is claimed. It reports the medians over
// rounds of polls/s for each size and of its ratio to one engine's rate
// in the same round, and the CPU this process (the engines and the demo
// server) used, in cores.
//
//	go test -run '^$' -bench FleetPolls -benchtime 3x ./engine
func BenchmarkFleetPolls(b *testing.B) {
	const tasks, window = 60, 2 * time.Second
	d := demo.New(demo.Options{PollInterval: time.Millisecond, TTL: time.Hour, NoPush: true})
	srv := httptest.NewServer(d.Handler())
	b.Cleanup(func() { srv.Close(); d.Close() })
	cfg, err := mcpconfig.ParseConfig("bench.json", fmt.Appendf(nil, `{"mcpServers":{"demo":{"url":%q}}}`, srv.URL+"/mcp"))
	if err != nil {
		b.Fatal(err)
	}
	db := pgtest.DB(b)
	ctx := context.Background()
	tiny := model.PollPolicy{Default: time.Microsecond, Floor: time.Microsecond, Cap: time.Microsecond, Growth: 1}
	openEngine := func() *Engine {
		e, err := Open(Options{DataDir: b.TempDir(), Store: db, Claim: true, Config: cfg, Policy: tiny, RequestTimeout: 10 * time.Second})
		if err != nil {
			b.Fatal(err)
		}
		return e
	}
	maker := openEngine()
	for i := range tasks {
		if _, err := maker.Call(ctx, deck.CallRequest{Server: demoRef, Tool: "approve", Args: fmt.Appendf(nil, `{"action":"a%d"}`, i)}); err != nil {
			b.Fatal(err)
		}
	}
	maker.Close()
	conn, err := pgx.Connect(ctx, db)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = conn.Close(ctx) })
	claimed := func() int {
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM taskdeck_tasks WHERE lease_until > now()`).Scan(&n); err != nil {
			b.Fatal(err)
		}
		return n
	}

	sizes := []int{1, 2, 3}
	rate, cores := map[int][]float64{}, map[int][]float64{}
	var rounds int
	for b.Loop() {
		for i := range sizes {
			k := sizes[(i+rounds)%len(sizes)]
			if _, err := conn.Exec(ctx, `UPDATE taskdeck_tasks SET owner = NULL, lease_until = NULL`); err != nil {
				b.Fatal(err)
			}
			// All k connected before any claims, so each takes its share.
			var es []*Engine
			for range k {
				es = append(es, openEngine())
			}
			for _, e := range es {
				if err := e.PollNow(ctx, nil); err != nil {
					b.Fatal(err)
				}
			}
			waitfor.Within(b, 30*time.Second, fmt.Sprintf("%d engines claim every task", k), func() bool { return claimed() == tasks })
			// Past each engine's first round over its tasks.
			warm := d.Stats().Gets + 2*tasks
			waitfor.Within(b, 30*time.Second, "every task polled twice", func() bool { return d.Stats().Gets >= warm })
			from, cpu0 := d.Stats().Gets, cputime.Used(b)
			start := time.Now()
			time.Sleep(window) // the window measured, not a wait for a condition
			took := time.Since(start).Seconds()
			rate[k] = append(rate[k], float64(d.Stats().Gets-from)/took)
			cores[k] = append(cores[k], (cputime.Used(b)-cpu0).Seconds()/took)
			for _, e := range es {
				e.Close()
			}
		}
		rounds++
	}
	for _, k := range sizes {
		s := slices.Sorted(slices.Values(rate[k]))
		c := slices.Sorted(slices.Values(cores[k]))
		ratios := make([]float64, rounds)
		for r := range ratios {
			ratios[r] = rate[k][r] / rate[1][r]
		}
		slices.Sort(ratios)
		b.ReportMetric(s[len(s)/2], fmt.Sprintf("polls/s-%d", k))
		b.ReportMetric(ratios[len(ratios)/2], fmt.Sprintf("x1-%d", k))
		b.ReportMetric(c[len(c)/2], fmt.Sprintf("cores-%d", k))
		b.Logf("%d engines: median %.0f polls/s (range %.0f–%.0f), %.2f× one engine (range %.2f–%.2f), this process on %.2f cores (range %.2f–%.2f), %d rounds",
			k, s[len(s)/2], s[0], s[len(s)-1], ratios[len(ratios)/2], ratios[0], ratios[len(ratios)-1], c[len(c)/2], c[0], c[len(c)-1], rounds)
	}
}
