package telemetry_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/engine"
	"github.com/taskdeck/taskdeck/internal/hostile"
	"github.com/taskdeck/taskdeck/internal/waitfor"
	mcpconfig "github.com/taskdeck/taskdeck/mcpclient/config"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/telemetry"
)

// TestOutboxMetrics: a failed task's event for a webhook that answers 503
// shows as a backlog of one, aging, with its failed attempts counted by
// endpoint; once the receiver takes it, the backlog is empty and the
// delivery counted.
func TestOutboxMetrics(t *testing.T) {
	var up atomic.Bool
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !up.Load() {
			http.Error(w, "down for the test", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(recv.Close)
	t.Setenv("TASKDECK_TEST_WEBHOOK_SECRET", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	srv := hostile.Start(t, demo.Options{Speed: 0.05, NoPush: true})
	cfg, err := mcpconfig.ParseConfig("test.json", fmt.Appendf(nil, `{"mcpServers":{"demo":{"url":%q}},
		"notify":{"webhooks":[{"url":%q,"secret":"${TASKDECK_TEST_WEBHOOK_SECRET}","events":["failed"]}]}}`, srv.URL, recv.URL))
	if err != nil {
		t.Fatal(err)
	}
	ep := cfg.Notify.Webhooks[0].Endpoint()
	m := telemetry.New(cfg.Names())
	e, err := engine.Open(engine.Options{DataDir: t.TempDir(), Config: cfg, Policy: fast, RequestTimeout: 5 * time.Second, Observer: m})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	m.Watch(e)
	hs := httptest.NewServer(m.Handler(""))
	t.Cleanup(hs.Close)
	mem := member{e: e, m: m, url: hs.URL}
	series := func(name string) string { return name + `{endpoint="` + ep + `"}` }

	if v, ok := mem.value(t, series("taskdeck_outbox_delivery_failures_total")); !ok || v != 0 {
		t.Fatalf("failures before any event: %v (present %v), want 0 from the start", v, ok)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitfor.Scale(60*time.Second))
	defer cancel()
	if _, err := e.Call(ctx, deck.CallRequest{Server: model.ServerRef{Name: "demo"}, Tool: "fail", Args: json.RawMessage(`{"mode":"error"}`)}); err != nil {
		t.Fatal(err)
	}
	if err := e.PollNow(ctx, nil); err != nil {
		t.Fatal(err)
	}
	waitfor.Within(t, 20*time.Second, "a failed attempt counted", func() bool {
		v, _ := mem.value(t, series("taskdeck_outbox_delivery_failures_total"))
		return v >= 1
	})
	if v, ok := mem.value(t, series("taskdeck_outbox_pending")); !ok || v != 1 {
		t.Errorf("backlog while the receiver fails: %v (present %v), want 1", v, ok)
	}
	waitfor.Within(t, 10*time.Second, "the oldest undelivered event to age", func() bool {
		v, _ := mem.value(t, series("taskdeck_outbox_oldest_pending_age_seconds"))
		return v > 0
	})
	up.Store(true)
	waitfor.Within(t, 20*time.Second, "the event delivered once the receiver takes it", func() bool {
		v, _ := mem.value(t, series("taskdeck_outbox_delivered_total"))
		return v == 1
	})
	pending, _ := mem.value(t, series("taskdeck_outbox_pending"))
	oldest, _ := mem.value(t, series("taskdeck_outbox_oldest_pending_age_seconds"))
	if pending != 0 || oldest != 0 {
		t.Errorf("after the delivery: backlog %v, oldest %v s; want 0 and 0", pending, oldest)
	}
}
