// Package promtest runs a real Prometheus (Debian's prometheus package)
// for a test: on a free loopback port, in a temporary directory, as the
// unprivileged nobody user when the tests run as root, scraping the
// targets it is given every second. The test's cleanup stops it by its
// pid. Without the package it skips the test, or fails it when CI=true.
package promtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/internal/testproc"
	"github.com/taskdeck/taskdeck/internal/waitfor"
)

// Prometheus is a running Prometheus.
type Prometheus struct {
	URL string // http://127.0.0.1:PORT
}

// Bin finds a program of the prometheus package ("prometheus",
// "promtool"), or skips (fails under CI=true) the test.
func Bin(t testing.TB, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		msg := fmt.Sprintf("no %s on PATH (install Debian's prometheus, as .ci/run does)", name)
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but %s", msg)
		}
		t.Skip(msg)
	}
	return path
}

// Start runs Prometheus scraping targets (HOST:PORT, path /metrics) every
// second, with bearer as the scrape's token when not empty, and waits
// until it is ready.
func Start(t testing.TB, bearer string, targets ...string) *Prometheus {
	t.Helper()
	bin := Bin(t, "prometheus")
	dir, err := os.MkdirTemp("", "taskdeck-promtest-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	quoted := make([]string, len(targets))
	for i, tg := range targets {
		quoted[i] = strconv.Quote(tg)
	}
	auth := ""
	if bearer != "" {
		auth = "    authorization:\n      credentials: " + strconv.Quote(bearer) + "\n"
	}
	conf := fmt.Sprintf("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: taskdeck\n%s    static_configs:\n      - targets: [%s]\n",
		auth, strings.Join(quoted, ", "))
	confPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		u, err := user.Lookup("nobody")
		if err != nil {
			t.Fatalf("running as root, and no nobody user to run Prometheus as: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	addrs := testproc.ServeOnPorts(t, 1, "prometheus", func(addrs []string) (*exec.Cmd, string) {
		cmd := exec.Command(bin, "--config.file="+confPath, "--storage.tsdb.path="+filepath.Join(dir, "data"),
			"--web.listen-address="+addrs[0])
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		return cmd, "http://" + addrs[0] + "/-/ready"
	})
	return &Prometheus{URL: "http://" + addrs[0]}
}

// Sample is one series of an instant query's answer.
type Sample struct {
	Labels map[string]string
	Value  float64
}

// Query runs an instant PromQL query over the HTTP API.
func (p *Prometheus) Query(query string) ([]Sample, error) {
	ctx, cancel := context.WithTimeout(context.Background(), waitfor.Scale(10*time.Second))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL+"/api/v1/query?query="+url.QueryEscape(query), nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, fmt.Errorf("query %q: %w", query, err)
	}
	if body.Status != "success" {
		return nil, fmt.Errorf("query %q: %s", query, body.Error)
	}
	if body.Data.ResultType != "vector" {
		return nil, fmt.Errorf("query %q: a %s, not a vector", query, body.Data.ResultType)
	}
	var out []Sample
	for _, r := range body.Data.Result {
		s, _ := r.Value[1].(string)
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("query %q: value %v: %w", query, r.Value[1], err)
		}
		out = append(out, Sample{Labels: r.Metric, Value: v})
	}
	return out, nil
}

// Scraped tells whether the last scrape of every target succeeded.
func (p *Prometheus) Scraped() bool {
	s, err := p.Query(`min(up{job="taskdeck"})`)
	return err == nil && len(s) == 1 && s[0].Value == 1
}
