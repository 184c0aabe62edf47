package mcpclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/internal/hostile"
	"github.com/taskdeck/taskdeck/mcpclient"
	"github.com/taskdeck/taskdeck/mcpclient/config"
	"github.com/taskdeck/taskdeck/model"
)

// A server that refuses the first server/discover with -32022 naming the
// version asked for (one replica of a fleet behind a balancer may) and
// takes go-sdk's retry: the session connects, and the first refusal is
// not reported as the outcome.
func TestDiscoverRetrySucceeds(t *testing.T) {
	srv := hostile.Start(t, demo.Options{})
	var refused atomic.Int32
	srv.On("server/discover", func(w http.ResponseWriter, req *hostile.Request) bool {
		if refused.Add(1) > 1 {
			return false
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32022,"message":"Unsupported protocol version","data":{"supported":["2026-07-28"],"requested":"2026-07-28"}}}`, req.ID)
		return true
	})
	cfg, err := config.ParseConfig("test.json", fmt.Appendf(nil, `{"mcpServers":{"demo":{"url":%q}}}`, srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	pool := mcpclient.NewPool(mcpclient.PoolOptions{Config: cfg})
	t.Cleanup(pool.Close)
	s, err := pool.Session(context.Background(), model.ServerRef{Name: "demo"})
	if err != nil {
		t.Fatalf("connect after a refused first discover: %v", err)
	}
	if !s.SupportsTasks {
		t.Fatal("the session lost the server's capabilities")
	}
	if n := refused.Load(); n < 2 {
		t.Fatalf("server/discover was sent %d times; the test needs the retry", n)
	}
}

// SEP-2243: null on an optional argument that travels as a header means
// "send no header". The call's check takes it as the argument's absence
// and the call goes out without the header; null on a required argument
// is still refused before anything is sent.
func TestNullHeaderArgumentOmitsTheHeader(t *testing.T) {
	srv := hostile.Start(t, demo.Options{Speed: 0.05})
	cfg, err := config.ParseConfig("test.json", fmt.Appendf(nil, `{"mcpServers":{"demo":{"url":%q}}}`, srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	pool := mcpclient.NewPool(mcpclient.PoolOptions{Config: cfg})
	t.Cleanup(pool.Close)
	ctx := context.Background()
	s, err := pool.Session(ctx, model.ServerRef{Name: "demo"})
	if err != nil {
		t.Fatal(err)
	}
	list, err := s.Tools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	args := json.RawMessage(`{"region":"eu-west","priority":null}`)
	if err := list.Check(demo.HeaderTool, args); err != nil {
		t.Fatalf("null on the optional header argument: %v", err)
	}
	if err := list.Check(demo.HeaderTool, json.RawMessage(`{"region":null}`)); err == nil {
		t.Fatal("null on the required header argument passed the check")
	}
	if _, err := s.CallTool(ctx, demo.HeaderTool, args, nil, ""); err != nil {
		t.Fatal(err)
	}
	calls := srv.Requests("tools/call")
	if len(calls) == 0 {
		t.Fatal("the call was not sent")
	}
	h := calls[len(calls)-1].Header
	if got := h.Values("Mcp-Param-Priority"); len(got) != 0 || h.Get("Mcp-Param-Region") != "eu-west" {
		t.Fatalf("headers sent: Mcp-Param-Priority %q, Mcp-Param-Region %q; want none and eu-west", got, h.Get("Mcp-Param-Region"))
	}
}

// A server that insists on the tasks extension answers -32021 since the
// extension's text was fixed, -32003 before: both read the same on
// taskdeck's own requests.
func TestMissingCapabilityOldAndNewCode(t *testing.T) {
	srv := hostile.Start(t, demo.Options{Speed: 0.05})
	cfg, err := config.ParseConfig("test.json", fmt.Appendf(nil, `{"mcpServers":{"demo":{"url":%q}}}`, srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, code := range []int{-32003, -32021} {
		pool := mcpclient.NewPool(mcpclient.PoolOptions{Config: cfg})
		t.Cleanup(pool.Close)
		s, err := pool.Session(ctx, model.ServerRef{Name: "demo"})
		if err != nil {
			t.Fatal(err)
		}
		srv.On("*", func(w http.ResponseWriter, req *hostile.Request) bool {
			if req.Method != "tasks/get" && req.Method != "tools/call" {
				return false
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":%d,"message":"Missing required client capability"}}`, req.ID, code)
			return true
		})
		if _, err := s.GetTask(ctx, "t-1"); !errors.Is(err, mcpclient.ErrExtensionRequired) {
			t.Errorf("tasks/get answered %d: %v", code, err)
		}
		// (-32003 on tools/call, through go-sdk, is its own "client is
		// closing" code: go-sdk ends the session, whatever taskdeck reads.)
		if code == -32003 {
			continue
		}
		if _, err := s.CallTool(ctx, "sleep", json.RawMessage(`{"seconds":1}`), nil, ""); !errors.Is(err, mcpclient.ErrExtensionRequired) {
			t.Errorf("tools/call answered %d: %v", code, err)
		}
	}
}
