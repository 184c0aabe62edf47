package proxy

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/engine"
	"github.com/taskdeck/taskdeck/internal/waitfor"
	mcpconfig "github.com/taskdeck/taskdeck/mcpclient/config"
	"github.com/taskdeck/taskdeck/model"
)

// TestMain lets the test binary be a proxy process of its own (the owner
// of a store, serving agents), for the test that kills it.
func TestMain(m *testing.M) {
	if dir := os.Getenv("TASKDECK_PROXY_CHILD_DIR"); dir != "" {
		if err := runChild(dir, os.Getenv("TASKDECK_PROXY_CHILD_CONFIG")); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if os.Getenv("TASKDECK_PROXY_DEMO_STDIO") != "" {
		// A stdio demo server, for the proxy's stdio upstream.
		if err := demo.New(demo.Options{Speed: 0.05, PollInterval: 20 * time.Millisecond}).ServeStdio(context.Background(), os.Stdin, os.Stdout); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func runChild(dir, config string) error {
	cfg, err := mcpconfig.ParseConfig("child.json", []byte(config))
	if err != nil {
		return err
	}
	eng, err := engine.Open(engine.Options{DataDir: dir, Config: cfg, Policy: fastPolicy})
	if err != nil {
		return err
	}
	defer eng.Close()
	l, err := Listen("127.0.0.1:0", "")
	if err != nil {
		return err
	}
	opts := Options{Deck: eng, Config: cfg}
	withTestAgent(cfg, &opts)
	h, err := New(opts).Handler()
	if err != nil {
		return err
	}
	fmt.Println(l.Addr().String())
	return http.Serve(l, h)
}

// startChild runs a proxy process over dir and returns its endpoint.
func startChild(t *testing.T, dir, config string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "TASKDECK_PROXY_CHILD_DIR="+dir, "TASKDECK_PROXY_CHILD_CONFIG="+config)
	cmd.Stderr = &testWriter{t}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("the proxy process printed no address: %v", err)
	}
	return cmd, "http://" + strings.TrimSpace(line) + "/mcp/demo"
}

// callTask makes one tasks-agent tools/call and returns the task id it
// was handed, or "" when the call did not get one (the proxy died).
func callTask(url, meta string) string {
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"sleep","arguments":{"seconds":600},"_meta":` + meta + `}}`
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return ""
	}
	var a answer
	if json.Unmarshal(raw, &a) != nil || a.Error != nil || str(a.Result["resultType"]) != "task" {
		return ""
	}
	return str(a.Result["taskId"])
}

// The proxy killed with SIGKILL at random moments of a storm of agent
// calls: every task the server created has a record, and every handle an
// agent was given names a record that holds the server's task.
func TestStormKilledProxy(t *testing.T) {
	if testing.Short() {
		t.Skip("kills proxy processes: not in -short")
	}
	srv := startRig(t, demo.Options{PollInterval: time.Hour}, Options{}).srv
	config := fmt.Sprintf(`{"mcpServers":{"demo":{"url":%q}}}`, srv.URL)
	dir := t.TempDir()
	meta := metaJSON("storm", true)
	var mu sync.Mutex
	var relayed []string
	for round := range 4 {
		mu.Lock()
		before := len(relayed)
		mu.Unlock()
		cmd, url := startChild(t, dir, config)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for range 6 {
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					if id := callTask(url, meta); id != "" {
						mu.Lock()
						relayed = append(relayed, id)
						mu.Unlock()
					}
				}
			})
		}
		// The kill comes once the round has relayed a random number (1 to
		// 4) of handles, with the other callers mid-call: a moment set by
		// the proxy's progress, not by the clock of a busy machine.
		extra := 1 + rand.IntN(4)
		waitfor.Within(t, 30*time.Second, fmt.Sprintf("the round's first %d handles relayed", extra), func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(relayed) >= before+extra
		})
		if err := syscall.Kill(cmd.Process.Pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		close(stop)
		wg.Wait()
		t.Logf("round %d: %d handles relayed so far, %d tasks on the server", round, len(relayed), srv.Demo.Stats().TasksCreated)
	}
	eng, err := engine.Open(engine.Options{DataDir: dir, Config: mustConfig(t, config)})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	list, err := eng.List(context.Background(), deck.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	byServerID := map[string]bool{}
	lost := 0 // records a kill left between the intent and the handle
	for _, e := range list {
		if e.Task.TaskID != "" {
			byServerID[e.Task.TaskID] = true
		} else if e.Task.Status == model.StatusOrphaned {
			lost++
		}
	}
	created := srv.Demo.Stats().TaskIDs
	missing := 0
	for _, id := range created {
		if !byServerID[id] {
			missing++
		}
	}
	if missing > lost {
		t.Fatalf("%d of the server's %d tasks have no record (only %d orphaned intents could stand for them)", missing, len(created), lost)
	}
	for _, id := range relayed {
		e, err := eng.Get(context.Background(), id)
		if err != nil || e.Task.TaskID == "" {
			t.Fatalf("handle %s was relayed to an agent but its record holds no task (%v)", id, err)
		}
	}
	if len(relayed) == 0 || len(created) == 0 {
		t.Fatal("the storm made no tasks: the test proved nothing")
	}
	t.Logf("%d server tasks, %d records, %d orphaned intents, %d handles relayed", len(created), len(list), lost, len(relayed))
}

func mustConfig(t *testing.T, config string) *mcpconfig.Config {
	t.Helper()
	cfg, err := mcpconfig.ParseConfig("test.json", []byte(config))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}
