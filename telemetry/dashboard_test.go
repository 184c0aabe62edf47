package telemetry_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/engine"
	"github.com/taskdeck/taskdeck/internal/hostile"
	"github.com/taskdeck/taskdeck/internal/pgtest"
	"github.com/taskdeck/taskdeck/internal/promtest"
	"github.com/taskdeck/taskdeck/internal/waitfor"
	"github.com/taskdeck/taskdeck/model"
)

// TestDashboardNamesExistingMetrics: the Grafana dashboard in the
// repository parses, every series its queries name is one a fleet engine
// exposes (and every one it exposes is on the dashboard), and Prometheus's
// own parser (promtool check rules) accepts every query.
func TestDashboardNamesExistingMetrics(t *testing.T) {
	raw, err := os.ReadFile("dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Title  string `json:"title"`
		Panels []struct {
			Type    string `json:"type"`
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("dashboard.json does not parse: %v", err)
	}

	// What a fleet engine exposes, with every observation made once so
	// that each vector has a series.
	srv := hostile.Start(t, demo.Options{NoPush: true})
	// A notify endpoint, so that the outbox's series are there.
	m := joinWith(t, srv, pgtest.DB(t), 0, 2*time.Second, 200*time.Millisecond, `,"notify":{"commands":[{"argv":["false"]}]}`)
	m.m.Polled("demo", time.Millisecond, engine.CauseTimeout)
	m.m.Called("demo", time.Millisecond, "")
	m.m.Answered("demo", time.Second)
	m.m.PushDropped("demo")
	// An open task, polled, with its server's push state known.
	if _, err := m.e.Call(context.Background(), deck.CallRequest{Server: model.ServerRef{Name: "demo"}, Tool: "sleep", Args: json.RawMessage(`{"seconds":30}`)}); err != nil {
		t.Fatal(err)
	}
	var body string
	waitfor.Within(t, 10*time.Second, "the open task and the push state in the metrics", func() bool {
		body = string(m.scrape(t))
		return strings.Contains(body, "\ntaskdeck_open_tasks{") && strings.Contains(body, "\ntaskdeck_push_up{")
	})
	exposed := map[string]bool{}
	typeLine := regexp.MustCompile(`(?m)^# TYPE (taskdeck_\w+) (\w+)$`)
	for _, s := range typeLine.FindAllStringSubmatch(body, -1) {
		exposed[s[1]] = true
		if s[2] == "histogram" {
			for _, suffix := range []string{"_bucket", "_count", "_sum"} {
				exposed[s[1]+suffix] = true
			}
		}
	}

	name := regexp.MustCompile(`\btaskdeck_\w+`)
	used := map[string]bool{}
	var exprs []string
	for _, p := range dash.Panels {
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
			for _, n := range name.FindAllString(tg.Expr, -1) {
				if !exposed[n] {
					t.Errorf("panel %q names %s, which taskdeck does not expose", p.Title, n)
				}
				used[strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(n, "_bucket"), "_count"), "_sum")] = true
			}
		}
	}
	for n := range exposed {
		if !used[n] && !slices.ContainsFunc([]string{"_bucket", "_count", "_sum"}, func(s string) bool { return strings.HasSuffix(n, s) }) {
			t.Errorf("%s is exposed but on no panel of the dashboard", n)
		}
	}

	// Grafana's $__rate_interval is a range Prometheus reads as any other.
	var rules strings.Builder
	rules.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	for i, e := range exprs {
		rules.WriteString("      - record: dashboard:q" + strconv.Itoa(i) + "\n        expr: " + strconv.Quote(strings.ReplaceAll(e, "$__rate_interval", "1m")) + "\n")
	}
	path := filepath.Join(t.TempDir(), "rules.yml")
	if err := os.WriteFile(path, []byte(rules.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtest.Bin(t, "promtool"), "check", "rules", path).CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules refuses a query of the dashboard: %v\n%s", err, out)
	}
}
