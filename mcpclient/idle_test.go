package mcpclient_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
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

// connRequests is the key of a connection's request count in its context.
type connRequests struct{}

// A tools/call goes on a connection of its own: a server may close a
// kept connection just as a request arrives on it (its idle or header
// timeout; a busy machine widens that moment), and net/http rightly does
// not send a POST again, so the call would fail though the server never
// saw it. Here the server closes any kept connection a tools/call comes
// on, unanswered, after the tool list went out on it.
func TestCallGoesOnAConnectionOfItsOwn(t *testing.T) {
	d := demo.New(demo.Options{})
	t.Cleanup(d.Close)
	var dropped atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := r.Context().Value(connRequests{}).(*atomic.Int64).Add(1)
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		if n > 1 && bytes.Contains(body, []byte(`"method":"tools/call"`)) {
			dropped.Add(1)
			if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
				conn.Close()
			}
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		d.Handler().ServeHTTP(w, r)
	}))
	srv.Config.ConnContext = func(ctx context.Context, _ net.Conn) context.Context {
		return context.WithValue(ctx, connRequests{}, new(atomic.Int64))
	}
	srv.Start()
	t.Cleanup(srv.Close)
	cfg, err := config.ParseConfig("alone.json", fmt.Appendf(nil, `{"mcpServers":{"demo":{"url":%q}}}`, srv.URL+"/mcp"))
	if err != nil {
		t.Fatal(err)
	}
	pool := mcpclient.NewPool(mcpclient.PoolOptions{Config: cfg})
	defer pool.Close()
	ctx := context.Background()
	sess, err := pool.Session(ctx, model.ServerRef{Name: "demo"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		out, err := sess.CallTool(ctx, "sleep", []byte(`{"seconds":1}`), nil, "")
		if err != nil || out.Task == nil {
			t.Fatalf("call %d: %v %+v (the server dropped %d tools/call that came on a kept connection)", i, err, out, dropped.Load())
		}
	}
}
