package mcpclient_test

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/internal/hostile"

	"github.com/taskdeck/taskdeck/internal/waitfor"

	"github.com/taskdeck/taskdeck/mcpclient"
	"github.com/taskdeck/taskdeck/mcpclient/config"
)

func TestMain(m *testing.M) {
	hostile.ServeStdioChild()
	os.Exit(m.Run())
}

// stdioPool is a pool whose server "stdio" is this test binary as a child
// process serving the demo.
func stdioPool(t *testing.T) *mcpclient.Pool {
	t.Helper()
	cfg, err := config.ParseConfig("test.json", fmt.Appendf(nil,
		`{"mcpServers": {"stdio": {"command": %q, "args": ["-test.run=^$"], "env": {%q: "1"}}}}`, os.Args[0], hostile.StdioChildEnv))
	if err != nil {
		t.Fatal(err)
	}
	pool := mcpclient.NewPool(mcpclient.PoolOptions{Config: cfg})
	t.Cleanup(pool.Close)
	return pool
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	waitfor.Within(t, 10*time.Second, what, cond)
}
