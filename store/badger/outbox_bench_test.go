package badger

import (
	"github.com/taskdeck/taskdeck/store"

	"context"
	"encoding/json"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/notify"
)

// BenchmarkOutboxWriteCost: the outbox's cost on a durable write, against
// a store with no endpoint, in the same run: 64 writers creating records
// in three stores, interleaved round by round (the order turning) so that
// a busy machine slows all alike. "every" commits an event (a 600-byte
// body, two endpoints) with every write, the worst case; "unwanted" has
// an event function that wants none of them (endpoints configured for
// other events). x-every and x-unwanted are the median ratios of the
// rounds to the store without one; x-seq-* the same for one writer's
// seqWrites creates in a row, each waiting for its own sync.
func BenchmarkOutboxWriteCost(b *testing.B) {
	const writers, batch, seqWrites = 64, 512, 32
	names, stores := outboxStores(b)
	total := make([]time.Duration, len(names))
	ratios, seqRatios := make([][]float64, len(names)), make([][]float64, len(names))
	b.ResetTimer()
	for round := range b.N {
		took, seq := make([]time.Duration, len(names)), make([]time.Duration, len(names))
		for k := range names {
			j := (round + k) % len(names)
			d, err := parallel(writers, batch, func(i int) error {
				return stores[j].Create(benchRecord(round*batch+i, true))
			})
			if err != nil {
				b.Fatal(err)
			}
			took[j], total[j] = d, total[j]+d
			// One writer: each write waits for its own sync.
			start := time.Now()
			for i := range seqWrites {
				if err := stores[j].Create(benchRecord((b.N+round)*batch+i, true)); err != nil {
					b.Fatal(err)
				}
			}
			seq[j] = time.Since(start)
		}
		for j := range names {
			ratios[j] = append(ratios[j], float64(took[j])/float64(took[0]))
			seqRatios[j] = append(seqRatios[j], float64(seq[j])/float64(seq[0]))
		}
	}
	b.StopTimer()
	for j, name := range names {
		b.ReportMetric(float64(total[j].Nanoseconds())/float64(b.N*batch), name+"-ns/rec")
		if j == 0 {
			continue
		}
		r, sr := ratios[j], seqRatios[j]
		slices.Sort(r)
		slices.Sort(sr)
		b.ReportMetric(r[len(r)/2], "x-"+name)
		b.ReportMetric(r[len(r)-1], "max-x-"+name)
		b.ReportMetric(sr[len(sr)/2], "x-seq-"+name)
	}
}

// outboxStores opens the three stores the outbox's cost benchmarks
// compare: "none" (no event function), "every" (the event of a task that
// waits for an answer, for two endpoints, on every write) and "unwanted"
// (an event function that wants none).
func outboxStores(b *testing.B) (names []string, stores []*Store) {
	body := benchEventBody(b)
	events := map[string]store.EventFunc{
		"none": nil,
		"every": func(_, next *model.Task) *store.Event {
			return &store.Event{ID: "msg_" + next.ID, Body: body, Endpoints: []string{"w1", "c1"}}
		},
		"unwanted": func(_, _ *model.Task) *store.Event { return nil },
	}
	names = []string{"none", "every", "unwanted"}
	stores = make([]*Store, len(names))
	for j, name := range names {
		var s *Store
		var err error
		// Badger's goroutines (its writer, flushes, compactions) inherit
		// the label: a CPU profile tells each store's cost apart
		// (go tool pprof -tagfocus store=every).
		pprof.Do(context.Background(), pprof.Labels("store", name), func(context.Context) {
			s, err = Open(filepath.Join(b.TempDir(), name), nil)
		})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.Close() })
		s.SetEvents(events[name])
		stores[j] = s
	}
	return names, stores
}

// benchEventBody is the body notify commits for a task that starts
// waiting for an answer to one question: its payload packed (notify.Pack),
// which the outbox stores with the write and a receiver gets unpacked.
func benchEventBody(b *testing.B) []byte {
	t := benchRecord(0, true)
	now := time.Now()
	_ = t.MoveTo(model.StatusInputRequired, "", now)
	t.InputRequests = map[string]model.InputRequest{"approve": {Method: "elicitation/create",
		Params: json.RawMessage(`{"message":"Deploy build 4411 of checkout-service to prod-eu-2?","requestedSchema":{"type":"object","properties":{"ok":{"type":"boolean","title":"Deploy now"}},"required":["ok"]}}`)}}
	body, err := notify.Pack(notify.NewPayload("input_required", t, now))
	if err != nil {
		b.Fatal(err)
	}
	return body
}
