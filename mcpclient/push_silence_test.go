package mcpclient_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/internal/waitfor"
	"github.com/taskdeck/taskdeck/mcpclient"
	"github.com/taskdeck/taskdeck/model"
)

func silence(d time.Duration) func(*mcpclient.PoolOptions) {
	return func(o *mcpclient.PoolOptions) { o.PushSilence = d }
}

// Issue 20, item 11: a stream that acknowledges and then carries nothing
// ends as a drop (a transient *TransportError that names the silence)
// once PushSilence has passed, so that its caller polls and subscribes
// again; and the demo's keep-alives keep a quiet stream up well past it.
func TestListenSilenceEndsTheStream(t *testing.T) {
	quiet := waitfor.Scale(300 * time.Millisecond)
	e := newPushEnv(t, demo.Options{KeepAlive: quiet / 6}, waitfor.Scale(5*time.Second), silence(quiet))
	id := e.hold(1)

	sub := e.listen(id)
	next(t, sub) // the current state; then nothing changes but the keep-alives
	select {
	case p, ok := <-sub.Events():
		t.Fatalf("a quiet stream with keep-alives: %v %v (%v)", p, ok, sub.Err())
	case <-time.After(5 * quiet):
	}
	e.step(id)
	if p := next(t, sub); p.Snapshot.Status != model.StatusCompleted {
		t.Fatalf("pushed %s, want completed", p.Snapshot.Status)
	}

	id = e.hold(1)
	e.srv.SilentPush()
	sub = e.listen(id)
	start := time.Now()
	err := ends(t, sub)
	var te *mcpclient.TransportError
	if !errors.As(err, &te) || !te.Transient || !strings.Contains(err.Error(), "keep-alive") {
		t.Fatalf("a silent stream ended with %v, want a transient transport error naming the silence", err)
	}
	t.Logf("a silent stream ended %v after its acknowledgement (bound %v)", time.Since(start), quiet)
}
