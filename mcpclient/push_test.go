package mcpclient_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/internal/hostile"
	"github.com/taskdeck/taskdeck/internal/waitfor"
	"github.com/taskdeck/taskdeck/mcpclient"
	"github.com/taskdeck/taskdeck/mcpclient/config"
	"github.com/taskdeck/taskdeck/mcpclient/wire"
	"github.com/taskdeck/taskdeck/model"
)

// pushEnv is a session to the hostile front of a real demo server with
// the hold tool, configured with a header.
type pushEnv struct {
	t    *testing.T
	srv  *hostile.Server
	sess *mcpclient.Session
	log  *syncBuffer // the pool's log, at debug
}

func newPushEnv(t *testing.T, opts demo.Options, timeout time.Duration, tune ...func(*mcpclient.PoolOptions)) *pushEnv {
	t.Helper()
	opts.Hold = true
	e := &pushEnv{t: t, srv: hostile.Start(t, opts)}
	cfg, err := config.ParseConfig("push.json", fmt.Appendf(nil,
		`{"mcpServers":{"demo":{"url":%q,"headers":{"X-Team":"blue"}}}}`, e.srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	e.log = &syncBuffer{}
	logger := slog.New(slog.NewTextHandler(e.log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	po := mcpclient.PoolOptions{Config: cfg, RequestTimeout: timeout, Logger: logger}
	for _, f := range tune {
		f(&po)
	}
	pool := mcpclient.NewPool(po)
	t.Cleanup(pool.Close)
	if e.sess, err = pool.Session(context.Background(), model.ServerRef{Name: "demo"}); err != nil {
		t.Fatal(err)
	}
	return e
}

// hold starts a hold task of steps steps and waits until it takes them.
func (e *pushEnv) hold(steps int) string {
	e.t.Helper()
	out, err := e.sess.CallTool(context.Background(), demo.HoldTool, fmt.Appendf(nil, `{"steps":%d}`, steps), nil, "")
	if err != nil || out.Task == nil {
		e.t.Fatalf("hold: %v %+v", err, out)
	}
	id := out.Task.TaskID
	waitFor(e.t, "the hold task to wait", func() bool {
		snap, err := e.sess.GetTask(context.Background(), id)
		return err == nil && snap.StatusMessage == fmt.Sprintf("step 0 of %d", steps)
	})
	return id
}

func (e *pushEnv) step(id string) {
	e.t.Helper()
	waitFor(e.t, "a step", func() bool { return e.srv.Demo.Step(id) == nil })
}

func (e *pushEnv) listen(ids ...string) *mcpclient.Subscription {
	e.t.Helper()
	sub, err := e.sess.Listen(context.Background(), ids)
	if err != nil {
		e.t.Fatalf("listen %v: %v", ids, err)
	}
	e.t.Cleanup(sub.Close)
	return sub
}

// pushWait bounds next and ends. It is long because it costs nothing
// when an event comes: TestListenBounded's messages of 6 to 17 MiB took
// over 30 s each under -race on a machine at load 25.
var pushWait = waitfor.Scale(time.Minute)

// next is the subscription's next event; it fails if the stream ends.
func next(t *testing.T, sub *mcpclient.Subscription) mcpclient.Pushed {
	t.Helper()
	select {
	case p, ok := <-sub.Events():
		if !ok {
			t.Fatalf("the stream ended: %v", sub.Err())
		}
		return p
	case <-time.After(pushWait):
		t.Fatal("nothing pushed")
	}
	return mcpclient.Pushed{}
}

// ends waits for the end of the stream and returns Err; an event fails.
func ends(t *testing.T, sub *mcpclient.Subscription) error {
	t.Helper()
	select {
	case p, ok := <-sub.Events():
		if ok {
			t.Fatalf("want the end of the stream, got %s %s", p.Snapshot.Status, p.Snapshot.StatusMessage)
		}
		return sub.Err()
	case <-time.After(pushWait):
		t.Fatal("the stream did not end")
	}
	return nil
}

func show(p mcpclient.Pushed) string {
	return fmt.Sprintf("%s %s %q", p.TaskID[:8], p.Snapshot.Status, p.Snapshot.StatusMessage)
}

// Only the ids the server knows are acknowledged; the listen carries the
// configured header and no Mcp-Name; each change arrives, in order, as
// tasks/get shows it, the last one with the result; the stream ends
// gracefully once the tasks have ended.
func TestListenPushesEveryChangeInOrder(t *testing.T) {
	e := newPushEnv(t, demo.Options{}, waitfor.Scale(5*time.Second))
	a, b := e.hold(2), e.hold(1)
	sub := e.listen(a, "no-such-task", b)
	if got := sub.Acknowledged(); !slices.Equal(got, []string{a, b}) {
		t.Fatalf("acknowledged %v, want [%s %s]", got, a, b)
	}
	req := e.srv.Requests(wire.MethodListen)[0]
	if req.Header.Get("X-Team") != "blue" || req.Header.Get("Mcp-Name") != "" || req.Header.Get("Mcp-Protocol-Version") != wire.ProtocolVersion {
		t.Errorf("listen headers: %v", req.Header)
	}
	var got []string
	for range 2 { // the current state of each
		got = append(got, show(next(t, sub)))
	}
	e.step(a)
	got = append(got, show(next(t, sub)))
	e.step(b)
	pb := next(t, sub)
	got = append(got, show(pb))
	e.step(a)
	pa := next(t, sub)
	got = append(got, show(pa))
	want := []string{
		a[:8] + ` working "step 0 of 2"`, b[:8] + ` working "step 0 of 1"`,
		a[:8] + ` working "step 1 of 2"`, b[:8] + ` completed "step 0 of 1"`, a[:8] + ` completed "step 1 of 2"`,
	}
	if !slices.Equal(got, want) {
		t.Fatalf("pushed\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !strings.Contains(string(pa.Snapshot.Result), "held for 2 steps") || !strings.Contains(string(pb.Snapshot.Result), "held for 1 steps") {
		t.Errorf("results: %s / %s", pa.Snapshot.Result, pb.Snapshot.Result)
	}
	if err := ends(t, sub); err != nil {
		t.Fatalf("the graceful end reads as %v", err)
	}
}

// Every way a server declines push reads as ErrNoPush (poll), in one
// line that names the server; one that cannot be reached does not.
func TestListenRefusedMeansPoll(t *testing.T) {
	ackNone := `{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"notifications":{}}}`
	for _, c := range []struct {
		name  string
		opts  demo.Options
		fault hostile.Fault
		why   string
	}{
		{"NoPush", demo.Options{NoPush: true}, nil, "none of the tasks"},
		{"extension refused", demo.Options{}, rpcError(400, wire.CodeMissingCapability), "error -32021"},
		{"unknown method", demo.Options{}, rpcError(200, wire.CodeMethodNotFound), "error -32601"},
		{"not found", demo.Options{}, status(http.StatusNotFound), "HTTP 404"},
		{"no acknowledgement", demo.Options{}, hostile.ListenScript(true), "did not acknowledge the listen within"},
		{"ended at once", demo.Options{}, hostile.ListenScript(false), "ended before it acknowledged"},
		{"ended after an empty ack", demo.Options{}, hostile.ListenScript(false, ackNone), "none of the tasks"},
		{"acknowledged others", demo.Options{}, hostile.ListenScript(true, ack("other")), "none of the tasks"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newPushEnv(t, c.opts, waitfor.Scale(500*time.Millisecond))
			id := e.hold(1)
			if c.fault != nil {
				e.srv.On(wire.MethodListen, c.fault)
			}
			start := time.Now()
			sub, err := e.sess.Listen(context.Background(), []string{id})
			if !errors.Is(err, mcpclient.ErrNoPush) {
				t.Fatalf("Listen: %v %v, want ErrNoPush", sub, err)
			}
			if msg := err.Error(); !strings.Contains(msg, c.why) || !strings.Contains(msg, "server demo") || strings.Contains(msg, "\n") {
				t.Errorf("the error %q does not say %q", msg, c.why)
			}
			if d := time.Since(start); d > waitfor.Scale(2*time.Second) {
				t.Errorf("Listen took %v", d)
			}
		})
	}
	t.Run("unreachable", func(t *testing.T) {
		e := newPushEnv(t, demo.Options{}, 500*time.Millisecond)
		id := e.hold(1)
		e.srv.On(wire.MethodListen, status(http.StatusServiceUnavailable))
		_, err := e.sess.Listen(context.Background(), []string{id})
		var te *mcpclient.TransportError
		if !errors.As(err, &te) || errors.Is(err, mcpclient.ErrNoPush) || !te.Transient {
			t.Fatalf("503: %v, want a transient TransportError", err)
		}
		e.srv.On(wire.MethodListen, hostile.Stall(nil))
		start := time.Now()
		_, err = e.sess.Listen(context.Background(), []string{id})
		if !errors.As(err, &te) || !strings.Contains(err.Error(), "no answer within 500ms") || time.Since(start) > waitfor.Scale(2*time.Second) {
			t.Fatalf("stalled: %v after %v, want a TransportError within the timeout", err, time.Since(start))
		}
	})
}

// A stdio session offers no push: ErrNoPush at once, nothing sent.
func TestListenOverStdioMeansPoll(t *testing.T) {
	sess, err := stdioPool(t).Session(context.Background(), model.ServerRef{Name: "stdio"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = sess.Listen(context.Background(), []string{"any"})
	if !errors.Is(err, mcpclient.ErrNoPush) || !strings.Contains(err.Error(), "stdio") {
		t.Fatalf("stdio: %v", err)
	}
}

func rpcError(code int, rpc int64) hostile.Fault {
	return func(w http.ResponseWriter, req *hostile.Request) bool {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":%d,"message":"no"}}`, req.ID, rpc)
		return true
	}
}

func status(code int) hostile.Fault {
	return func(w http.ResponseWriter, req *hostile.Request) bool {
		w.WriteHeader(code)
		return true
	}
}

func ack(ids ...string) string {
	quoted, _ := json.Marshal(ids)
	return fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"notifications":{"taskIds":%s}}}`, quoted)
}

func taskNote(id, status string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/tasks","params":{"taskId":%q,"status":%q,"createdAt":"2026-12-01T10:00:00Z","lastUpdatedAt":"2026-12-01T10:00:01Z","ttlMs":60000,"pollIntervalMs":500}}`, id, status)
}

// A drop mid-way (after N notifications, or on demand) ends the stream
// with a transport error, after the notifications before it; and the
// next listen (the re-subscription) works again.
func TestListenDroppedStream(t *testing.T) {
	e := newPushEnv(t, demo.Options{}, waitfor.Scale(5*time.Second))
	id := e.hold(3)
	drop := e.srv.DropPush(2)
	sub := e.listen(id)
	first := next(t, sub)
	e.step(id)
	second := next(t, sub)
	err := ends(t, sub)
	var te *mcpclient.TransportError
	if !errors.As(err, &te) || errors.Is(err, mcpclient.ErrNoPush) {
		t.Fatalf("after a drop: %v, want a TransportError", err)
	}
	if first.Snapshot.StatusMessage != "step 0 of 3" || second.Snapshot.StatusMessage != "step 1 of 3" {
		t.Errorf("before the drop: %s, %s", show(first), show(second))
	}
	if drop.Cuts() != 1 {
		t.Errorf("%d cuts", drop.Cuts())
	}

	drop = e.srv.DropPush(0)
	sub = e.listen(id)
	if p := next(t, sub); p.Snapshot.StatusMessage != "step 1 of 3" {
		t.Errorf("re-subscribed: %s", show(p))
	}
	drop.Drop()
	if err := ends(t, sub); !errors.As(err, &te) {
		t.Fatalf("after Drop: %v, want a TransportError", err)
	}
	t.Logf("a dropped stream reads: %v", err)
}

// Notifications for ids not acknowledged are dropped; one that does not
// decode ends the stream with an error that says so.
func TestListenForeignAndBadNotifications(t *testing.T) {
	e := newPushEnv(t, demo.Options{}, waitfor.Scale(5*time.Second))
	e.srv.On(wire.MethodListen, hostile.ListenScript(true, ack("mine", "not-asked"),
		taskNote("other", "working"), taskNote("not-asked", "working"), taskNote("mine", "working"),
		`{"jsonrpc":"2.0","method":"notifications/tasks","params":{"taskId":"mine","status":"exploded"}}`,
		taskNote("mine", "completed")))
	sub := e.listen("mine", "also-mine")
	if got := sub.Acknowledged(); !slices.Equal(got, []string{"mine"}) {
		t.Fatalf("acknowledged %v", got)
	}
	if p := next(t, sub); p.TaskID != "mine" || p.Snapshot.Status != model.StatusWorking {
		t.Fatalf("first: %+v", p)
	}
	if log := e.log.String(); strings.Count(log, "not acknowledged") != 2 || !strings.Contains(log, "task=not-asked") {
		t.Errorf("the dropped notifications are not both logged:\n%s", log)
	}
	err := ends(t, sub)
	var te *mcpclient.TransportError
	if !errors.As(err, &te) || !te.Answered() || !strings.Contains(err.Error(), "exploded") {
		t.Fatalf("undecodable: %v", err)
	}
}

// A notification past the 16 MiB bound ends the stream; the ones before
// it arrive; a redirect is refused and nothing reaches its target.
func TestListenBounded(t *testing.T) {
	e := newPushEnv(t, demo.Options{}, waitfor.Scale(5*time.Second))
	huge := fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/tasks","params":{"taskId":"mine","status":"working","statusMessage":"%s"}}`,
		strings.Repeat("A", 17<<20))
	e.srv.On(wire.MethodListen, hostile.ListenScript(true, ack("mine"), taskNote("mine", "working"), huge))
	sub := e.listen("mine")
	next(t, sub)
	err := ends(t, sub)
	if !strings.Contains(fmt.Sprint(err), "larger than 16 MiB") {
		t.Fatalf("huge: %v", err)
	}

	// The bound is each message's: a long stream may carry more in all.
	big := fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/tasks","params":{"taskId":"mine","status":"working","statusMessage":"%s"}}`,
		strings.Repeat("B", 6<<20))
	e.srv.On(wire.MethodListen, hostile.ListenScript(true, ack("mine"), big, big, big))
	sub = e.listen("mine")
	for range 3 {
		if p := next(t, sub); len(p.Snapshot.StatusMessage) != 6<<20 {
			t.Fatalf("a 6 MiB message arrived as %d bytes", len(p.Snapshot.StatusMessage))
		}
	}
	sub.Close()

	target := hostile.StartRecorder(t)
	e.srv.On(wire.MethodListen, hostile.Redirect(http.StatusTemporaryRedirect, target.URL+"/mcp"))
	_, err = e.sess.Listen(context.Background(), []string{"mine"})
	var re *mcpclient.RedirectError
	if !errors.As(err, &re) || re.Method != wire.MethodListen || len(target.Received()) != 0 {
		t.Fatalf("redirect: %v; the target got %d requests", err, len(target.Received()))
	}
}

// A stream that stays silent ends when the caller's context does, and
// says why; Close ends one at once. No goroutine is left behind.
func TestListenStalledAndClosed(t *testing.T) {
	e := newPushEnv(t, demo.Options{}, waitfor.Scale(5*time.Second))
	id := e.hold(1)
	base := runtime.NumGoroutine()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	sub, err := e.sess.Listen(ctx, []string{id})
	if err != nil {
		t.Fatal(err)
	}
	next(t, sub) // the current state; then the task does not change
	start := time.Now()
	if err := ends(t, sub); !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > waitfor.Scale(2*time.Second) {
		t.Fatalf("stalled: %v after %v", err, time.Since(start))
	}
	for range 5 {
		sub := e.listen(id)
		next(t, sub)
		sub.Close()
		if err := sub.Err(); err != nil {
			t.Fatalf("after Close: %v", err)
		}
		if _, ok := <-sub.Events(); ok {
			t.Fatal("Events is open after Close")
		}
	}
	waitFor(t, "the listen goroutines to end", func() bool { return runtime.NumGoroutine() <= base })
}

// syncBuffer is a log that tests read while the client writes it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// A stream that is over by the time Listen returns still hands over what
// it carried and its graceful end; a JSON-RPC error that ends a stream
// reads as the server's error, not as a drop.
func TestListenEndsOnTheServersWord(t *testing.T) {
	e := newPushEnv(t, demo.Options{}, waitfor.Scale(5*time.Second))
	// The end as 2026-07-28 first said it (an empty result), and as it says
	// since spec PR #3171 (a completion result with subscription metadata).
	for _, result := range []string{`{}`, `{"resultType":"complete"}`,
		`{"resultType":"complete","_meta":{"io.modelcontextprotocol/subscriptionId":"x"}}`} {
		e.srv.On(wire.MethodListen, func(w http.ResponseWriter, req *hostile.Request) bool {
			end := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":%s}`, req.ID, result)
			return hostile.ListenScript(false, ack("mine"), taskNote("mine", "working"), end)(w, req)
		})
		sub := e.listen("mine")
		if p := next(t, sub); p.Snapshot.Status != model.StatusWorking {
			t.Fatalf("pushed %s", show(p))
		}
		if err := ends(t, sub); err != nil {
			t.Fatalf("graceful end with %s: %v", result, err)
		}
	}

	e.srv.On(wire.MethodListen, func(w http.ResponseWriter, req *hostile.Request) bool {
		return hostile.ListenScript(false, ack("mine"),
			fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32603,"message":"shutting down"}}`, req.ID))(w, req)
	})
	sub := e.listen("mine")
	var se *mcpclient.ServerError
	if err := ends(t, sub); !errors.As(err, &se) || se.Code != -32603 {
		t.Fatalf("error end: %v, want a ServerError", err)
	}
}
