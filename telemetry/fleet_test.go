package telemetry_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/engine"
	"github.com/taskdeck/taskdeck/internal/hostile"
	"github.com/taskdeck/taskdeck/internal/pgtest"
	"github.com/taskdeck/taskdeck/internal/waitfor"
	mcpconfig "github.com/taskdeck/taskdeck/mcpclient/config"
	"github.com/taskdeck/taskdeck/model"
	_ "github.com/taskdeck/taskdeck/store/postgres" // engine.Open of a postgres:// store
	"github.com/taskdeck/taskdeck/telemetry"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

var fast = model.PollPolicy{Default: 20 * time.Millisecond, Floor: 10 * time.Millisecond, Cap: 200 * time.Millisecond, Growth: 1.6}

// member is an engine of a fleet with its metrics served on loopback.
type member struct {
	e   *engine.Engine
	m   *telemetry.Metrics
	url string
}

func join(t *testing.T, srv *hostile.Server, db string, i int, lease, renew time.Duration) member {
	t.Helper()
	return joinWith(t, srv, db, i, lease, renew, "")
}

// joinWith is join with more of the config's top-level keys (",..." JSON).
func joinWith(t *testing.T, srv *hostile.Server, db string, i int, lease, renew time.Duration, more string) member {
	t.Helper()
	// The URL names the engine, so that the server tells them apart.
	cfg, err := mcpconfig.ParseConfig("test.json", fmt.Appendf(nil, `{"mcpServers":{"demo":{"url":%q}}%s}`, fmt.Sprintf("%s?engine=%d", srv.URL, i), more))
	if err != nil {
		t.Fatal(err)
	}
	m := telemetry.New(cfg.Names())
	e, err := engine.Open(engine.Options{DataDir: t.TempDir(), Store: db, Claim: true, Config: cfg, ClaimLease: lease, ClaimRenew: renew,
		Policy: fast, RequestTimeout: 5 * time.Second, Observer: m})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	m.Watch(e)
	hs := httptest.NewServer(m.Handler(""))
	t.Cleanup(hs.Close)
	if err := e.PollNow(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	return member{e: e, m: m, url: hs.URL}
}

// value is the sample of the series named (name{labels...}, labels in
// the exposition's order, without engine) in a scrape of m; ok false when
// absent.
func (m member) value(t *testing.T, series string) (float64, bool) {
	t.Helper()
	body := m.scrape(t)
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + `(?:\{engine="[^"]+"\})? (\S+)$`)
	s := re.FindSubmatch(body)
	if s == nil {
		return 0, false
	}
	v, err := strconv.ParseFloat(string(s[1]), 64)
	if err != nil {
		t.Fatal(err)
	}
	return v, true
}

// scrape is the exposition, as Prometheus reads it.
func (m member) scrape(t *testing.T) []byte {
	t.Helper()
	resp, err := http.Get(m.url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// TestFleetMetrics: an engine that stops renewing its lease loses its
// task to another, whose metrics count the takeover and the claim it
// holds, and show its heartbeat.
func TestFleetMetrics(t *testing.T) {
	srv := hostile.Start(t, demo.Options{Speed: 1, PollInterval: 50 * time.Millisecond, NoPush: true})
	db := pgtest.DB(t)
	// The slow engine claims at once, then renews too late.
	slow := join(t, srv, db, 0, time.Second, time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), waitfor.Scale(60*time.Second))
	defer cancel()
	_, err := slow.e.Call(ctx, deck.CallRequest{Server: model.ServerRef{Name: "demo"}, Tool: "sleep", Args: json.RawMessage(`{"seconds":30}`)})
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := slow.value(t, "taskdeck_fleet_leases_taken_over_total"); !ok || v != 0 {
		t.Fatalf("the slow engine's takeovers before any: %v (present %v), want 0", v, ok)
	}
	other := join(t, srv, db, 1, 2*time.Second, 200*time.Millisecond)
	// At least one: on a loaded machine the other engine may itself renew
	// late, lose the task and take it over again.
	waitfor.Within(t, 10*time.Second, "the other engine counts the task it took over, and holds it", func() bool {
		v, _ := other.value(t, "taskdeck_fleet_leases_taken_over_total")
		held, _ := other.value(t, "taskdeck_fleet_claims_held")
		return v >= 1 && held == 1
	})
	if v, ok := other.value(t, "taskdeck_fleet_heartbeat_age_seconds"); !ok || v < 0 || v > waitfor.Scale(10*time.Second).Seconds() {
		t.Errorf("the other engine's heartbeat age: %v s (present %v), want a recent beat", v, ok)
	}
	// The fence's refusals are counted where a refused write can be made
	// (engine's TestFleetLostClaimCannotOverwrite); here the series is there.
	if _, ok := slow.value(t, "taskdeck_fleet_fenced_writes_total"); !ok {
		t.Errorf("the slow engine exposes no fenced writes")
	}
}
