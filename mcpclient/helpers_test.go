package mcpclient_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/mcpclient"
	"github.com/taskdeck/taskdeck/mcpclient/config"
)

// stdioEnv makes this test binary a demo server on stdio (see stdioPool).
const stdioEnv = "TASKDECK_TEST_STDIO_DEMO"

func TestMain(m *testing.M) {
	if os.Getenv(stdioEnv) == "1" {
		srv := demo.New(demo.Options{Speed: 0.05, PollInterval: 20 * time.Millisecond})
		srv.ServeStdio(context.Background(), os.Stdin, os.Stdout)
		srv.Close()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// stdioPool is a pool whose server "stdio" is this test binary as a child
// process serving the demo.
func stdioPool(t *testing.T) *mcpclient.Pool {
	t.Helper()
	cfg, err := config.ParseConfig("test.json", fmt.Appendf(nil,
		`{"mcpServers": {"stdio": {"command": %q, "args": ["-test.run=^$"], "env": {%q: "1"}}}}`, os.Args[0], stdioEnv))
	if err != nil {
		t.Fatal(err)
	}
	pool := mcpclient.NewPool(mcpclient.PoolOptions{Config: cfg})
	t.Cleanup(pool.Close)
	return pool
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
