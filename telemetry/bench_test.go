package telemetry_test

import (
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/engine"
	"github.com/taskdeck/taskdeck/internal/pollbench"
	"github.com/taskdeck/taskdeck/telemetry"
)

// BenchmarkPollMetrics times Deck.PollNow of one open task on a demo
// server on loopback (store read, tasks/get, nothing to write) with the
// metrics off and on, in the same run: two engines, each on its own store,
// neither watching (so only the benchmark polls), in alternating short
// rounds, so that the machine's drift hits both. x-off is the median of
// the rounds' ratios on/off; the target is ≤ 1.02. On a shared machine a
// round's noise is larger than the metrics' cost, so the cost of the
// observation itself (ns-observe: what Polled adds to a poll) is timed in
// the same run too, and x-observe is the poll with it over the poll
// without.
func BenchmarkPollMetrics(b *testing.B) {
	names := []string{"demo"}
	r := pollbench.Rounds(b, func(o *engine.Options) { o.Observer = telemetry.New(names) })
	m := telemetry.New(names)
	const observations = 1_000_000
	start := time.Now()
	for i := range observations {
		m.Polled("demo", time.Duration(i), "")
	}
	observe := float64(time.Since(start).Nanoseconds()) / observations
	r.Report(b, "x-off")
	b.ReportMetric(observe, "ns-observe")
	b.ReportMetric((r.OffNs()+observe)/r.OffNs(), "x-observe")
	b.ReportMetric(0, "ns/op")
}
