package mcpclient

import (
	"context"
	"errors"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/internal/waitfor"
)

// A request timeout that ran out reads as a deadline, to the caller and
// through net/http, like context.WithTimeout's; cancelling it reads as a
// cancellation.
func TestRequestTimeoutReadsAsADeadline(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0") // accepts, never answers
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := WithRequestTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+l.Addr().String()+"/mcp", nil)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = http.DefaultClient.Do(req)
	if d := time.Since(start); d < 150*time.Millisecond || d > waitfor.Scale(2*time.Second) {
		t.Errorf("the request ended after %s; the timeout is 200ms", d)
	}
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(ctx.Err(), context.DeadlineExceeded) ||
		!errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
		t.Errorf("request %v, Err %v, Cause %v; want deadline exceeded", err, ctx.Err(), context.Cause(ctx))
	}

	ctx, cancel = WithRequestTimeout(context.Background(), time.Minute)
	cancel()
	<-ctx.Done()
	if !errors.Is(ctx.Err(), context.Canceled) {
		t.Errorf("cancelled: Err %v", ctx.Err())
	}
}
