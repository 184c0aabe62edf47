package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/internal/clitest"
	"github.com/taskdeck/taskdeck/internal/pgtest"
	"github.com/taskdeck/taskdeck/internal/promtest"
)

// serveMetrics starts `serve --metrics 127.0.0.1:0` with extra flags and
// returns it with the metrics' host:port, as it printed it.
func (d *deck) serveMetrics(extra ...string) (*proc, string) {
	d.t.Helper()
	owner := d.start(append([]string{"serve", "--metrics", "127.0.0.1:0"}, extra...)...)
	addr := regexp.MustCompile(`metrics at http://(127\.0\.0\.1:\d+)/metrics`)
	clitest.WaitFor(d.t, "the metrics' address", func() bool { return addr.MatchString(owner.Stderr.String()) || owner.exited() })
	m := addr.FindStringSubmatch(owner.Stderr.String())
	if m == nil {
		d.t.Fatalf("serve --metrics printed no address (exit %d): %s", owner.Code, owner.Stderr)
	}
	clitest.WaitFor(d.t, "serve to own the store", func() bool { return strings.Contains(owner.Stderr.String(), "ctrl+c stops") })
	return owner, m[1]
}

// scrape is one GET /metrics with the token (none: "").
func scrape(t *testing.T, addr, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/metrics", nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestMetricsScrapedByPrometheus runs a scripted session against the demo
// server (calls, an answer, a task that fails, a server that goes away)
// under `serve --metrics`, has a real Prometheus scrape it, and checks the
// series with PromQL over Prometheus's API; promtool checks the
// exposition, and no task id is a label.
func TestMetricsScrapedByPrometheus(t *testing.T) {
	t.Parallel()
	promtest.Bin(t, "prometheus")
	promtool := promtest.Bin(t, "promtool")
	demo := startDemo(t, "127.0.0.1:0", "--no-push") // polled
	gone := startDemo(t, "127.0.0.1:0")              // pushes, then goes away
	d := newDeck(t)
	// A webhook nobody answers: the failed task's event stays in the outbox.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + l.Addr().String() + "/td"
	l.Close()
	d.writeConfig(fmt.Sprintf(`{"mcpServers":{"demo":{"url":%q},"gone":{"url":%q}},
		"notify":{"webhooks":[{"url":%q,"secret":"${TD_TEST_WEBHOOK_SECRET}","events":["failed"]}]}}`, demo.url, gone.url, refused))
	const token = "scrape-token-for-the-test"
	d.env = append(d.env, "TASKDECK_PROXY_TOKEN="+token, // not on the command line
		"TD_TEST_WEBHOOK_SECRET=whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	_, addr := d.serveMetrics()

	if code, _ := scrape(t, addr, ""); code != http.StatusUnauthorized {
		t.Fatalf("a scrape without the token: HTTP %d, want 401", code)
	}
	prom := promtest.Start(t, token, addr)

	var ids []string
	r := d.run("call", "--server", "demo", "sleep", "--args", `{"seconds":1}`, "--wait").Must(t, 0)
	ids = append(ids, strings.Fields(r.Stdout)[1])
	id := clitest.OnlyID(t, d.run("call", "--server", "demo", "approve", "--args", `{"action":"deploy"}`).Must(t, 0))
	ids = append(ids, id)
	d.waitStatus(id, "input_required")
	d.run("answer", id, "approve-1", approveAnswer).Must(t, 0)
	d.waitStatus(id, "completed")
	r = d.run("call", "--server", "demo", "fail", "--args", `{"mode":"error"}`, "--wait").Must(t, exitTaskBad)
	ids = append(ids, strings.Fields(r.Stdout)[1])
	id = clitest.OnlyID(t, d.run("call", "--server", "gone", "sleep", "--args", `{"seconds":600}`).Must(t, 0))
	ids = append(ids, id)

	// want waits until Prometheus's answer to query is value.
	want := func(query string, value float64) {
		t.Helper()
		var last []promtest.Sample
		var err error
		clitest.WaitFor(t, fmt.Sprintf("%s == %g in Prometheus", query, value), func() bool {
			last, err = prom.Query(query)
			return err == nil && len(last) == 1 && last[0].Value == value
		})
	}
	want(`taskdeck_push_up{server="gone"}`, 1)
	gone.p.kill()
	want(`taskdeck_tasks{status="completed"}`, 2)
	want(`taskdeck_tasks{status="failed"}`, 1)
	want(`taskdeck_tasks{status="working"}`, 1)
	want(`taskdeck_open_tasks{server="gone",status="working"}`, 1)
	want(`taskdeck_tool_call_duration_seconds_count{server="demo",outcome="ok"}`, 3)
	want(`taskdeck_tool_call_duration_seconds_count{server="gone",outcome="ok"}`, 1)
	want(`taskdeck_input_wait_answered_seconds_count{server="demo"}`, 1)
	want(`taskdeck_oldest_input_wait_seconds`, 0)
	want(`taskdeck_push_stream_drops_total{server="gone"} > bool 0`, 1)
	want(`taskdeck_push_up{server="gone"}`, 0)
	want(`taskdeck_poll_duration_seconds_count{server="demo"} > bool 0`, 1)
	want(`sum(taskdeck_poll_failures_total{server="gone",cause="transport"}) > bool 0`, 1)
	want(`sum(taskdeck_poll_failures_total{server="demo"}) or vector(0)`, 0)
	want(`taskdeck_store_revision > bool 0`, 1)
	want(`sum(taskdeck_outbox_pending)`, 1)
	want(`sum(taskdeck_outbox_delivery_failures_total) > bool 0`, 1)
	want(`max(taskdeck_outbox_oldest_pending_age_seconds) > bool 0`, 1)
	want(`sum(taskdeck_outbox_delivered_total)`, 0)

	// The audit chain's length: every revision's entry until a prune; then
	// what `audit --json` lists, the checkpoint at the last entry pruned.
	want(`taskdeck_audit_entries == bool taskdeck_store_revision`, 1)
	d.run("audit", "prune", "--before", time.Now().UTC().Format(time.RFC3339Nano)).Must(t, 0)
	want(`taskdeck_audit_entries < bool taskdeck_store_revision`, 1)
	var listed int
	var got []promtest.Sample
	clitest.WaitFor(t, "taskdeck_audit_entries to be the entries `audit --json` lists", func() bool {
		listed = strings.Count(d.run("audit", "--json").Must(t, 0).Stdout, "\n")
		got, err = prom.Query(`taskdeck_audit_entries`)
		return err == nil && len(got) == 1 && got[0].Value == float64(listed)
	})

	_, body := scrape(t, addr, token)
	check := exec.CommandContext(context.Background(), promtool, "check", "metrics")
	check.Stdin = strings.NewReader(body)
	var out bytes.Buffer
	check.Stdout, check.Stderr = &out, &out
	if err := check.Run(); err != nil {
		t.Fatalf("promtool check metrics: %v\n%s", err, out.String())
	}
	for _, id := range ids {
		if strings.Contains(body, id) {
			t.Fatalf("task id %s is in the exposition", id)
		}
	}
}

// TestMetricsFleetTakeover: two `serve --metrics` engines of one
// PostgreSQL fleet, both scraped by a real Prometheus; the engine holding
// a task's claim is SIGKILLed, and PromQL shows the other take the lease
// over and hold the claim, with its heartbeat fresh.
func TestMetricsFleetTakeover(t *testing.T) {
	t.Parallel()
	promtest.Bin(t, "prometheus")
	db := pgtest.DB(t)
	demo := startDemo(t, "127.0.0.1:0", "--no-push")
	config := fmt.Sprintf(`{"store":%q,"mcpServers":{"demo":{"url":%q}}}`, db, demo.url)
	engines := map[string]*proc{} // by metrics address: Prometheus's instance label
	var addrs []string
	for range 2 {
		d := newDeck(t)
		d.writeConfig(config)
		p, addr := d.serveMetrics()
		engines[addr] = p
		addrs = append(addrs, addr)
	}
	prom := promtest.Start(t, "", addrs...)
	caller := newDeck(t)
	caller.writeConfig(config)
	id := clitest.OnlyID(t, caller.run("call", "--server", "demo", "sleep", "--args", `{"seconds":3600}`).Must(t, 0))

	// one waits until query has one series, with a value cond accepts.
	one := func(query string, cond func(float64) bool) promtest.Sample {
		t.Helper()
		var got []promtest.Sample
		var err error
		clitest.WaitFor(t, query+" in Prometheus", func() bool {
			got, err = prom.Query(query)
			return err == nil && len(got) == 1 && cond(got[0].Value)
		})
		return got[0]
	}
	holder := one(`taskdeck_fleet_claims_held == 1`, func(float64) bool { return true })
	victim := holder.Labels["instance"]
	engines[victim].kill()
	survivor := addrs[0]
	if survivor == victim {
		survivor = addrs[1]
	}
	// The victim's series go stale at its first failed scrape; the
	// survivor takes the lease over once it runs out (7 s).
	sel := fmt.Sprintf(`{instance=%q}`, survivor)
	one(`taskdeck_fleet_leases_taken_over_total`+sel, func(v float64) bool { return v >= 1 })
	one(`taskdeck_fleet_claims_held`+sel, func(v float64) bool { return v == 1 })
	one(`sum(taskdeck_fleet_claims_held)`, func(v float64) bool { return v == 1 })
	one(`taskdeck_fleet_heartbeat_age_seconds`+sel, func(v float64) bool { return v < 10 })
	one(`sum(taskdeck_fleet_fenced_writes_total) or vector(0)`, func(v float64) bool { return v == 0 })
	if st := caller.getJSON(id).Status; st != "working" {
		t.Fatalf("the task is %s after the takeover, want working", st)
	}
}

// TestMetricsAddressRefused: off loopback without a token, serve refuses
// the metrics' address in one line (usage), before it takes the store.
func TestMetricsAddressRefused(t *testing.T) {
	t.Parallel()
	d := newDeck(t)
	r := d.run("serve", "--metrics", "0.0.0.0:0").Must(t, exitUsage)
	clitest.OneErrorLine(t, r, "metrics address 0.0.0.0:0", "give --token")
	r = d.run("serve", "--metrics", "no-port").Must(t, exitUsage)
	clitest.OneErrorLine(t, r, `metrics address "no-port" is not HOST:PORT`)
}

// TestLogFormatJSON: --log-format json writes the log file as one JSON
// object a line, with the metrics' field names (a failed poll names its
// record and server); another format is refused in one line.
func TestLogFormatJSON(t *testing.T) {
	t.Parallel()
	srv := startDemo(t, "127.0.0.1:0", "--no-push")
	d := newDeck(t)
	d.writeConfig(fmt.Sprintf(`{"mcpServers":{"demo":{"url":%q}}}`, srv.url))
	id := clitest.OnlyID(t, d.run("--log-format", "json", "call", "--server", "demo", "sleep", "--args", `{"seconds":600}`).Must(t, 0))
	srv.p.kill()
	d.run("--log-format", "json", "-v", "get", id).Must(t, 0) // its refresh fails: the row shows it

	raw, err := os.ReadFile(filepath.Join(d.dataDir, "taskdeck.log"))
	if err != nil {
		t.Fatal(err)
	}
	failed := false
	for line := range strings.Lines(string(raw)) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("a log line is not JSON: %v\n%s", err, line)
		}
		if rec["msg"] == "poll failed" && rec["record"] == id && rec["server"] == "demo" {
			failed = true
		}
	}
	if !failed {
		t.Fatalf("no \"poll failed\" line naming record %s and server demo in the log:\n%s", id, raw)
	}

	r := d.run("--log-format", "xml", "ls").Must(t, exitUsage)
	clitest.OneErrorLine(t, r, `"xml" is not a log format: text or json`)
}

// TestDoctor: doctor against the demo server in text and --json (exit 0),
// with --call (the task's hints), against one that is gone (exit 3, one
// line), and without a server or with --args alone (usage).
func TestDoctor(t *testing.T) {
	t.Parallel()
	srv := startDemo(t, "127.0.0.1:0")
	d := newDeck(t)
	d.writeConfig(fmt.Sprintf(`{"mcpServers":{"demo":{"url":%q}}}`, srv.url))
	r := d.run("doctor", "demo").Must(t, 0)
	clitest.MustContain(t, r, r.Stdout, "revision      2026-07-28", "tasks         offered", "-32602", "can answer with a task", "problems      none")
	r = d.run("doctor", "--url", srv.url, "--json").Must(t, 0)
	var diag struct {
		Reached   bool     `json:"reached"`
		Revision  string   `json:"revision"`
		Tasks     bool     `json:"tasks"`
		Listen    bool     `json:"listenAnswered"`
		TaskTools []string `json:"taskTools"`
	}
	if err := json.Unmarshal([]byte(r.Stdout), &diag); err != nil || !diag.Reached || diag.Revision != "2026-07-28" || !diag.Tasks || !diag.Listen || len(diag.TaskTools) == 0 {
		t.Fatalf("doctor --json: %+v, %v\n%s", diag, err, r)
	}
	if len(d.ls()) != 0 {
		t.Fatalf("doctor started a task")
	}
	// Allowed a call, doctor reads the hints of the task it starts, then
	// cancels it (the demo's defaults: 500 ms and 10 min); it keeps no record.
	r = d.run("doctor", "demo", "--call", "sleep", "--args", `{"seconds":600}`).Must(t, 0)
	clitest.MustContain(t, r, r.Stdout, "hints         pollIntervalMs 500ms, ttlMs 10m0s (task ", " of sleep, cancelled)", "problems      none")
	if len(d.ls()) != 0 {
		t.Fatalf("doctor --call kept a record")
	}
	r = d.run("doctor", "demo", "--args", `{}`).Must(t, exitUsage)
	clitest.OneErrorLine(t, r, "--args goes with --call TOOL")
	r = d.run("doctor", "demo", "--call", "sleep", "--args", `[1]`).Must(t, exitUsage)
	clitest.OneErrorLine(t, r, "--args: arguments must be a JSON object")
	srv.p.kill()
	r = d.run("doctor", "demo").Must(t, exitUnreachable)
	clitest.OneErrorLine(t, r, "server demo: cannot connect")
	r = d.run("doctor").Must(t, exitUsage)
	clitest.OneErrorLine(t, r, "name one server")
}
