package notify_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/taskdeck/taskdeck/internal/waitfor"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/notify"
)

// BenchmarkCommitToDelivery: tasks on a real Badger store move to failed
// at 100 a second, each committing an event; a Deliverer POSTs them to a
// loopback receiver that verifies each signature. It reports the time
// from the start of the write that commits an event to its delivery (p50, p99), and, measured in the
// same run as the baseline, a signed POST of the same body sent straight
// from the writer (x-p50: the outbox's p50 over the direct one's).
func BenchmarkCommitToDelivery(b *testing.B) {
	const rate, events = 100, 200
	secret := "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		b.Fatal(err)
	}
	var mu sync.Mutex
	got := map[string]time.Time{}
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := wh.Verify(body, r.Header); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var p notify.Payload
		_ = json.Unmarshal(body, &p)
		mu.Lock()
		got[p.Data.Task.ID] = time.Now()
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer rcv.Close()
	s, _, _ := hookStore(b, fmt.Sprintf(`{"notify":{"webhooks":[{"url":%q,"secret":%q,"events":["failed"]}]}}`, rcv.URL, secret))
	var outbox, direct []time.Duration
	b.ResetTimer()
	for range b.N {
		committed := map[string]time.Time{}
		tick := time.NewTicker(time.Second / rate)
		for i := range events {
			<-tick.C
			rec := model.NewIntent(model.ServerRef{Name: "demo"}, "build", nil, "", time.Now())
			if i%2 == 1 {
				// The baseline: the same kind of body, signed and POSTed
				// by the writer itself, no outbox.
				body, _ := json.Marshal(notify.NewPayload("failed", rec, time.Now()))
				start := time.Now()
				sig, _ := wh.Sign("msg_direct", start, body)
				req, _ := http.NewRequest(http.MethodPost, rcv.URL, nil)
				req.Body = io.NopCloser(bytes.NewReader(body))
				req.Header.Set("webhook-id", "msg_direct")
				req.Header.Set("webhook-timestamp", fmt.Sprint(start.Unix()))
				req.Header.Set("webhook-signature", sig)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				resp.Body.Close()
				direct = append(direct, time.Since(start))
				continue
			}
			if err := s.Create(rec); err != nil {
				b.Fatal(err)
			}
			committed[rec.ID] = time.Now() // from the start of the write that commits the event
			if _, err := s.Update(rec.ID, func(x *model.Task) (bool, error) { return true, x.MoveTo(model.StatusFailed, "", time.Now()) }); err != nil {
				b.Fatal(err)
			}
		}
		tick.Stop()
		all := waitfor.Until(30*time.Second, 5*time.Millisecond, func() bool {
			mu.Lock()
			defer mu.Unlock()
			for id := range committed {
				if _, ok := got[id]; !ok {
					return false
				}
			}
			return true
		})
		if !all {
			b.Fatal("not every event delivered within 30 s")
		}
		mu.Lock()
		for id, at := range committed {
			outbox = append(outbox, got[id].Sub(at))
		}
		mu.Unlock()
	}
	b.StopTimer()
	slices.Sort(outbox)
	slices.Sort(direct)
	pct := func(d []time.Duration, p float64) float64 {
		return float64(d[int(float64(len(d)-1)*p)].Microseconds()) / 1000
	}
	b.ReportMetric(pct(outbox, 0.5), "p50-ms")
	b.ReportMetric(pct(outbox, 0.99), "p99-ms")
	b.ReportMetric(pct(direct, 0.5), "direct-p50-ms")
	b.ReportMetric(pct(outbox, 0.5)/pct(direct, 0.5), "x-p50")
}
