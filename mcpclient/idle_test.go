package mcpclient_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/mcpclient"
	"github.com/taskdeck/taskdeck/mcpclient/config"
	"github.com/taskdeck/taskdeck/model"
)

// A pool keeps one connection per poll slot open between requests, no
// more (each is two goroutines and a socket), and closes them all when it
// closes, not at the transport's idle timeout 90 s later.
func TestPoolKeepsAConnectionPerSlotAndClosesThem(t *testing.T) {
	var open atomic.Int64
	srv := httptest.NewUnstartedServer(demo.New(demo.Options{}).Handler())
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			open.Add(1)
		case http.StateClosed, http.StateHijacked:
			open.Add(-1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	cfg, err := config.ParseConfig("idle.json", fmt.Appendf(nil, `{"mcpServers":{"demo":{"url":%q}}}`, srv.URL+"/mcp"))
	if err != nil {
		t.Fatal(err)
	}
	const slots = 3
	pool := mcpclient.NewPool(mcpclient.PoolOptions{Config: cfg, IdlePerServer: slots})
	defer pool.Close()
	ctx := context.Background()
	sess, err := pool.Session(ctx, model.ServerRef{Name: "demo"})
	if err != nil {
		t.Fatal(err)
	}
	out, err := sess.CallTool(ctx, "approve", []byte(`{"action":"deploy"}`), nil, "")
	if err != nil || out.Task == nil {
		t.Fatalf("approve: %v %+v", err, out)
	}
	// Far more polls at once than slots: each takes a connection.
	var wg sync.WaitGroup
	errs := make(chan error, 8*slots)
	for range 8 * slots {
		wg.Go(func() {
			if _, err := sess.GetTask(ctx, out.Task.TaskID); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	waitFor(t, fmt.Sprintf("at most %d connections open after the polls (open: %d)", slots, open.Load()), func() bool { return open.Load() <= slots })
	pool.Close()
	waitFor(t, "no connection open after Close", func() bool { return open.Load() == 0 })
}
