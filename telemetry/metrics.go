// Package telemetry exposes what an engine does as Prometheus metrics
// (`serve --metrics ADDR`). It is off unless asked for: an engine without
// an observer pays a nil check per poll and call.
//
// Cardinality is bounded: the labels are server (a configured name, or
// "adhoc" for every call to a bare URL), status (eight), cause (the
// engine's Cause* words), outcome ("ok" or a cause) and engine (this
// process's, on a fleet). No task id or tool name is ever a label.
package telemetry

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/engine"
	"github.com/taskdeck/taskdeck/model"
)

const ns = "taskdeck"

// Source is what a scrape reads: an engine.
type Source interface {
	Stats() (engine.Stats, error)
}

// Metrics is the registry of one engine's metrics; it is the engine's
// Observer (engine.Options.Observer).
type Metrics struct {
	reg          *prometheus.Registry
	polls        *prometheus.HistogramVec
	pollFailures *prometheus.CounterVec
	calls        *prometheus.HistogramVec
	answerWait   *prometheus.HistogramVec
	pushDrops    *prometheus.CounterVec
}

var _ engine.Observer = (*Metrics)(nil)

// requestBuckets span a loopback answer (1 ms) to the request timeout's
// default (30 s).
var requestBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}

// waitBuckets span a person answering at once (1 s) to a week.
var waitBuckets = []float64{1, 5, 15, 60, 300, 900, 3600, 4 * 3600, 24 * 3600, 7 * 24 * 3600}

// New makes the metrics; servers are the configured names, whose series
// are there from the start (at zero), so that rate() sees their first
// failure.
func New(servers []string) *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		polls: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "poll_duration_seconds",
			Help: "Polls (tasks/get, answers re-sent before it) by server, and how long each took.", Buckets: requestBuckets}, []string{"server"}),
		pollFailures: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "poll_failures_total",
			Help: "Polls that got no usable answer, by server and cause."}, []string{"server", "cause"}),
		calls: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "tool_call_duration_seconds",
			Help: "tools/call requests by server and outcome (ok, or the cause of the failure), and how long each took.", Buckets: requestBuckets}, []string{"server", "outcome"}),
		answerWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "input_wait_answered_seconds",
			Help: "How long waits for input lasted until every request was answered, by server.", Buckets: waitBuckets}, []string{"server"}),
		pushDrops: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "push_stream_drops_total",
			Help: "Push streams that went down (their tasks polled meanwhile), by server."}, []string{"server"}),
	}
	m.reg.MustRegister(m.polls, m.pollFailures, m.calls, m.answerWait, m.pushDrops,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, s := range servers {
		m.polls.WithLabelValues(s)
		m.calls.WithLabelValues(s, "ok")
		m.answerWait.WithLabelValues(s)
		m.pushDrops.WithLabelValues(s)
	}
	return m
}

// Polled implements engine.Observer.
func (m *Metrics) Polled(server string, took time.Duration, cause string) {
	m.polls.WithLabelValues(server).Observe(took.Seconds())
	if cause != "" {
		m.pollFailures.WithLabelValues(server, cause).Inc()
	}
}

// Called implements engine.Observer.
func (m *Metrics) Called(server string, took time.Duration, cause string) {
	if cause == "" {
		cause = "ok"
	}
	m.calls.WithLabelValues(server, cause).Observe(took.Seconds())
}

// Answered implements engine.Observer.
func (m *Metrics) Answered(server string, waited time.Duration) {
	m.answerWait.WithLabelValues(server).Observe(waited.Seconds())
}

// PushDropped implements engine.Observer.
func (m *Metrics) PushDropped(server string) { m.pushDrops.WithLabelValues(server).Inc() }

// Watch adds the metrics read from src at each scrape: the store's counts
// and the engine's state. Call it once, before serving.
func (m *Metrics) Watch(src Source) { m.reg.MustRegister(&stats{src: src, now: time.Now}) }

// WatchTraces adds the count of spans that never reached the trace
// backend (tracing.Tracer.Dropped): its exporter was down or slow. Call it
// once, before serving, when traces are on.
func (m *Metrics) WatchTraces(dropped func() int64) {
	m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: ns, Name: "trace_spans_dropped_total",
		Help: "Spans dropped before they reached the trace backend: its exporter was down or slow (the queue was full), or the export failed."},
		func() float64 { return float64(dropped()) }))
}

// Handler serves the exposition. With a token, a request must carry it
// (Authorization: Bearer TOKEN).
func (m *Metrics) Handler(token string) http.Handler {
	h := promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError, Timeout: 10 * time.Second})
	if token == "" {
		return h
	}
	want := sha256.Sum256([]byte(token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		sum := sha256.Sum256([]byte(got))
		if subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="taskdeck"`)
			http.Error(w, "the metrics need the operator's token: send Authorization: Bearer <token>", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// CheckListen refuses, with a one-line error, an address the metrics must
// not be served on: anything but loopback needs a token (the proxy's rule).
func CheckListen(addr, token string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("metrics address %q is not HOST:PORT (e.g. 127.0.0.1:9464)", addr)
	}
	if ip := net.ParseIP(host); token != "" || strings.EqualFold(host, "localhost") || (ip != nil && ip.IsLoopback()) {
		return nil
	}
	if host == "" {
		host = "every interface"
	}
	return fmt.Errorf("metrics address %s listens on %s, beyond this machine: give --token (or $TASKDECK_PROXY_TOKEN) for scrapers to send, or listen on 127.0.0.1", addr, host)
}

// stats is the collector of what an engine holds, read at each scrape.
type stats struct {
	src Source
	now func() time.Time
}

var (
	descTasks = prometheus.NewDesc(ns+"_tasks", "Records in the store by status (the store's counts, one read).", []string{"status"}, nil)
	descOpen  = prometheus.NewDesc(ns+"_open_tasks",
		"Open tasks this engine polls, by server and status (a task appears after its first poll).", []string{"server", "status"}, nil)
	descOldest = prometheus.NewDesc(ns+"_oldest_input_wait_seconds",
		"Age of the oldest wait for input among the tasks this engine polls (0: none waits).", nil, nil)
	descPushUp = prometheus.NewDesc(ns+"_push_up",
		"1 while the server's push stream is up, 0 while it is down or not offered (servers asked only).", []string{"server"}, nil)
	descRevision = prometheus.NewDesc(ns+"_store_revision",
		"The store's last revision: the audit chain's head, one entry per committed change.", nil, nil)
	descAuditEntries = prometheus.NewDesc(ns+"_audit_entries",
		"Entries in the audit chain kept since the last `taskdeck audit prune`: what `audit verify` reads; it grows with every change until pruned.", nil, nil)
	descClaims = prometheus.NewDesc(ns+"_fleet_claims_held",
		"Claims this engine holds on a fleet's tasks.", []string{"engine"}, nil)
	descTakenOver = prometheus.NewDesc(ns+"_fleet_leases_taken_over_total",
		"Leases this engine took over from an engine that stopped renewing them.", []string{"engine"}, nil)
	descFenced = prometheus.NewDesc(ns+"_fleet_fenced_writes_total",
		"Writes the database refused because the task's claim had moved to another engine.", []string{"engine"}, nil)
	descBeat = prometheus.NewDesc(ns+"_fleet_heartbeat_age_seconds",
		"Time since this engine last recorded itself alive.", []string{"engine"}, nil)
	// The outbox (issue 27), by endpoint: the name `notify status --json`
	// gives a configured webhook or command (a hash of where it sends).
	descOutboxPending = prometheus.NewDesc(ns+"_outbox_pending",
		"Events committed to the outbox and not yet delivered, by endpoint (the store's count).", []string{"endpoint"}, nil)
	descOutboxOldest = prometheus.NewDesc(ns+"_outbox_oldest_pending_age_seconds",
		"Age of the oldest event not yet delivered, by endpoint (0: none pending).", []string{"endpoint"}, nil)
	descOutboxDelivered = prometheus.NewDesc(ns+"_outbox_delivered_total",
		"Events delivered, by endpoint (the store's count: on a fleet, every engine's).", []string{"endpoint"}, nil)
	descOutboxExpired = prometheus.NewDesc(ns+"_outbox_expired_total",
		"Events dropped undelivered at the end of their retry window, by endpoint (the store's count).", []string{"endpoint"}, nil)
	descOutboxFailures = prometheus.NewDesc(ns+"_outbox_delivery_failures_total",
		"Delivery attempts of this engine that failed (retried until the window ends), by endpoint.", []string{"endpoint"}, nil)
)

func (s *stats) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descTasks, descOpen, descOldest, descPushUp, descRevision, descAuditEntries, descClaims, descTakenOver, descFenced, descBeat,
		descOutboxPending, descOutboxOldest, descOutboxDelivered, descOutboxExpired, descOutboxFailures} {
		ch <- d
	}
}

func (s *stats) Collect(ch chan<- prometheus.Metric) {
	st, err := s.src.Stats()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(descTasks, err)
		return
	}
	now := s.now()
	for _, status := range model.AllStatuses {
		ch <- prometheus.MustNewConstMetric(descTasks, prometheus.GaugeValue, float64(st.Counts[status]), string(status))
	}
	for server, by := range st.Open {
		for status, n := range by {
			ch <- prometheus.MustNewConstMetric(descOpen, prometheus.GaugeValue, float64(n), server, string(status))
		}
	}
	oldest := 0.0
	if !st.OldestInput.IsZero() {
		oldest = max(now.Sub(st.OldestInput).Seconds(), 0)
	}
	ch <- prometheus.MustNewConstMetric(descOldest, prometheus.GaugeValue, oldest)
	for server, state := range st.Push {
		up := 0.0
		if state == deck.PushUp {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(descPushUp, prometheus.GaugeValue, up, server)
	}
	ch <- prometheus.MustNewConstMetric(descRevision, prometheus.GaugeValue, float64(st.Revision))
	ch <- prometheus.MustNewConstMetric(descAuditEntries, prometheus.GaugeValue, float64(st.AuditEntries))
	collectOutbox(ch, st.Outbox, now)
	if f := st.Fleet; f != nil {
		ch <- prometheus.MustNewConstMetric(descClaims, prometheus.GaugeValue, float64(f.Claims), f.Engine)
		ch <- prometheus.MustNewConstMetric(descTakenOver, prometheus.CounterValue, float64(f.TakenOver), f.Engine)
		ch <- prometheus.MustNewConstMetric(descFenced, prometheus.CounterValue, float64(f.Fenced), f.Engine)
		if !f.Beat.IsZero() {
			ch <- prometheus.MustNewConstMetric(descBeat, prometheus.GaugeValue, max(now.Sub(f.Beat).Seconds(), 0), f.Engine)
		}
	}
}

// collectOutbox sends the outbox's series: every endpoint the store
// counts or this engine tried, each series there from the start.
func collectOutbox(ch chan<- prometheus.Metric, o *engine.OutboxStats, now time.Time) {
	if o == nil {
		return
	}
	for ep, st := range o.Endpoints {
		age := 0.0
		if !st.Oldest.IsZero() {
			age = max(now.Sub(st.Oldest).Seconds(), 0)
		}
		ch <- prometheus.MustNewConstMetric(descOutboxPending, prometheus.GaugeValue, float64(st.Pending), ep)
		ch <- prometheus.MustNewConstMetric(descOutboxOldest, prometheus.GaugeValue, age, ep)
		ch <- prometheus.MustNewConstMetric(descOutboxDelivered, prometheus.CounterValue, float64(st.Delivered), ep)
		ch <- prometheus.MustNewConstMetric(descOutboxExpired, prometheus.CounterValue, float64(st.Expired), ep)
	}
	for ep, n := range o.Failures {
		if _, counted := o.Endpoints[ep]; !counted { // configured, nothing committed yet
			ch <- prometheus.MustNewConstMetric(descOutboxPending, prometheus.GaugeValue, 0, ep)
			ch <- prometheus.MustNewConstMetric(descOutboxOldest, prometheus.GaugeValue, 0, ep)
			ch <- prometheus.MustNewConstMetric(descOutboxDelivered, prometheus.CounterValue, 0, ep)
			ch <- prometheus.MustNewConstMetric(descOutboxExpired, prometheus.CounterValue, 0, ep)
		}
		ch <- prometheus.MustNewConstMetric(descOutboxFailures, prometheus.CounterValue, float64(n), ep)
	}
}
