package mcpclient

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskdeck/taskdeck/internal/nodetest"
	"github.com/taskdeck/taskdeck/mcpclient/config"
	"github.com/taskdeck/taskdeck/mcpclient/legacy"
	"github.com/taskdeck/taskdeck/model"
)

// BenchmarkLegacyPoll times GetTask (tasks/get through taskdeck's client:
// decode, checks, snapshot) against a bare tasks/get on the same go-sdk
// session, to the TypeScript SDK 1.x server of testdata (its own task
// store, over stdio), interleaved op by op (the order alternating) so
// that a busy machine slows both alike. The tasks stay working for the
// whole run, so every poll is one request. Reported: the medians of
// each, and the ratio of medians per round of 100 pairs: median, min and
// max (x-bare, x-bare-min, x-bare-max); the target is ≤ 1.2.
func BenchmarkLegacyPoll(b *testing.B) {
	src, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"sdk": map[string]any{
		"command": "node", "args": []string{nodetest.LegacyServers(b).SDKServer()}}}})
	cfg, err := config.ParseConfig("bench.json", src)
	if err != nil {
		b.Fatal(err)
	}
	pool := NewPool(PoolOptions{Config: cfg})
	defer pool.Close()
	ctx := context.Background()
	s, err := pool.Session(ctx, model.ServerRef{Name: "sdk"})
	if err != nil {
		b.Fatal(err)
	}
	if s.Protocol != legacy.ProtocolVersion {
		b.Fatalf("negotiated %s", s.Protocol)
	}
	ids := make([]string, 20)
	for i := range ids {
		out, err := s.CallTool(ctx, "wait", json.RawMessage(`{"ms":3600000}`), nil, "")
		if err != nil || out.Task == nil {
			b.Fatalf("wait: %v %+v", err, out)
		}
		ids[i] = out.Task.TaskID
	}
	ours := func(id string) error {
		snap, err := s.GetTask(ctx, id)
		if err == nil && snap.Status != model.StatusWorking {
			b.Fatalf("task %s is %s; the bench needs it working", id, snap.Status)
		}
		return err
	}
	bare := func(id string) error {
		_, err := mcp.CallCustomMethod[*legacy.IDParams, *legacy.Raw](ctx, s.cs, legacy.MethodGet, &legacy.IDParams{TaskID: id})
		return err
	}
	timed := func(f func(string) error, id string) time.Duration {
		start := time.Now()
		if err := f(id); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	const round = 100
	var oursAll, bareAll, ratios []float64
	var roundOurs, roundBare []float64
	b.ResetTimer()
	for i := range b.N {
		id := ids[i%len(ids)]
		var o, r time.Duration
		if i%2 == 0 {
			o, r = timed(ours, id), timed(bare, id)
		} else {
			r, o = timed(bare, id), timed(ours, id)
		}
		roundOurs, roundBare = append(roundOurs, float64(o)), append(roundBare, float64(r))
		if len(roundOurs) == round {
			ratios = append(ratios, median(roundOurs)/median(roundBare))
			oursAll, bareAll = append(oursAll, roundOurs...), append(bareAll, roundBare...)
			roundOurs, roundBare = roundOurs[:0:0], roundBare[:0:0]
		}
	}
	b.StopTimer()
	oursAll, bareAll = append(oursAll, roundOurs...), append(bareAll, roundBare...)
	b.ReportMetric(median(oursAll), "ours-ns/op")
	b.ReportMetric(median(bareAll), "bare-ns/op")
	if len(ratios) == 0 {
		ratios = []float64{median(oursAll) / median(bareAll)}
	}
	b.ReportMetric(median(ratios), "x-bare")
	b.ReportMetric(slices.Min(ratios), "x-bare-min")
	b.ReportMetric(slices.Max(ratios), "x-bare-max")
}

func median(v []float64) float64 {
	s := slices.Sorted(slices.Values(v))
	return s[len(s)/2]
}
