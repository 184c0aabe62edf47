package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/internal/waitfor"
	"github.com/taskdeck/taskdeck/mcpclient"
	mcpconfig "github.com/taskdeck/taskdeck/mcpclient/config"
	"github.com/taskdeck/taskdeck/mcpclient/wire"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store/badger"
)

// recorded is one request as it reached the server, and the content type
// of the answer.
type recorded struct {
	header http.Header
	body   []byte
	ctype  string
}

// recorder keeps every request per Mcp-Method and counts connections.
type recorder struct {
	mu    sync.Mutex
	seen  map[string][]recorded
	conns int
}

func (rc *recorder) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		next.ServeHTTP(w, r)
		rc.mu.Lock()
		defer rc.mu.Unlock()
		m := r.Header.Get("Mcp-Method")
		rc.seen[m] = append(rc.seen[m], recorded{r.Header.Clone(), body, w.Header().Get("Content-Type")})
	})
}

func (rc *recorder) last(method string) recorded {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	all := rc.seen[method]
	if len(all) == 0 {
		return recorded{}
	}
	return all[len(all)-1]
}

// directEnv is a tracker over a real store and a real demo server on
// loopback, answering in JSON or in SSE, with a configured header.
type directEnv struct {
	rec     *recorder
	srv     *httptest.Server
	pool    *mcpclient.Pool
	tracker *tracker
	ref     model.ServerRef
}

func newDirectEnv(t *testing.T, jsonResponse bool) *directEnv {
	t.Helper()
	d := demo.New(demo.Options{Speed: 0.05, PollInterval: 20 * time.Millisecond, JSONResponse: jsonResponse})
	e := &directEnv{rec: &recorder{seen: map[string][]recorded{}}, ref: model.ServerRef{Name: "demo"}}
	e.srv = httptest.NewUnstartedServer(e.rec.wrap(d.Handler()))
	e.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			e.rec.mu.Lock()
			e.rec.conns++
			e.rec.mu.Unlock()
		}
	}
	e.srv.Start()
	cfg, err := mcpconfig.ParseConfig("direct.json", fmt.Appendf(nil,
		`{"mcpServers":{"demo":{"url":%q,"headers":{"X-Team":"blue"}}}}`, e.srv.URL+"/mcp"))
	if err != nil {
		t.Fatal(err)
	}
	st, err := badger.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	e.pool = mcpclient.NewPool(mcpclient.PoolOptions{Config: cfg})
	e.tracker = newTracker(st, e.pool, trackerOptions{Policy: trackerPolicy, RequestTimeout: waitfor.Scale(5 * time.Second)})
	t.Cleanup(func() {
		e.pool.Close()
		st.Close()
		e.srv.Close()
		d.Close()
	})
	return e
}

func (e *directEnv) poll(t *testing.T, id string) pollResult {
	t.Helper()
	res, err := e.tracker.Poll(context.Background(), id)
	if err == nil {
		err = res.Err
	}
	if err != nil {
		t.Fatalf("poll: %v", err)
	}
	return res
}

// params is the part of a request body the tests compare.
type params struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  struct {
		Meta   json.RawMessage `json:"_meta"`
		TaskID string          `json:"taskId"`
	} `json:"params"`
}

func decodeParams(t *testing.T, body []byte) params {
	t.Helper()
	var p params
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatalf("request body %q: %v", body, err)
	}
	return p
}

// A poll over HTTP is the request go-sdk sends (headers, _meta, body),
// carries the configured header, reads either kind of answer, and reuses
// its connection.
func TestPollOverHTTP(t *testing.T) {
	for _, jsonResponse := range []bool{false, true} {
		want := map[bool]string{false: "text/event-stream", true: "application/json"}[jsonResponse]
		t.Run(want, func(t *testing.T) {
			e := newDirectEnv(t, jsonResponse)
			rec, _, err := tupled(e.tracker.Call(context.Background(), callRequest{Server: e.ref, Tool: "approve", Args: json.RawMessage(`{"action":"ship"}`)}))
			if err != nil {
				t.Fatal(err)
			}
			// The demo's approve asks from a goroutine of its own: the
			// first poll may still find the task working.
			res := e.poll(t, rec.ID)
			for deadline := time.Now().Add(waitfor.Scale(5 * time.Second)); res.Task.Status == model.StatusWorking && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond)
				res = e.poll(t, rec.ID)
			}
			if res.Task.Status != model.StatusInputRequired || len(res.Task.InputRequests) != 1 {
				t.Fatalf("polled: %s with %d input requests; want input_required with 1", res.Task.Status, len(res.Task.InputRequests))
			}

			get, call := e.rec.last(wire.MethodGet), e.rec.last("tools/call")
			if get.ctype != want {
				t.Errorf("the server answered tasks/get with %q, want %q", get.ctype, want)
			}
			for _, h := range []string{"Content-Type", "Accept", "Mcp-Protocol-Version", "X-Team"} {
				if g, c := get.header.Get(h), call.header.Get(h); g != c || g == "" {
					t.Errorf("header %s: tasks/get %q, go-sdk's tools/call %q", h, g, c)
				}
			}
			if g := get.header.Get("Mcp-Method"); g != wire.MethodGet {
				t.Errorf("Mcp-Method %q", g)
			}
			if g := get.header.Get("Mcp-Name"); g != rec.TaskID {
				t.Errorf("Mcp-Name %q, want the task id %q", g, rec.TaskID)
			}
			gp, cp := decodeParams(t, get.body), decodeParams(t, call.body)
			if gp.JSONRPC != "2.0" || gp.Method != wire.MethodGet || gp.Params.TaskID != rec.TaskID {
				t.Errorf("tasks/get body %s", get.body)
			}
			if !bytes.Equal(gp.Params.Meta, cp.Params.Meta) {
				t.Errorf("_meta differs from go-sdk's:\n tasks/get  %s\n tools/call %s", gp.Params.Meta, cp.Params.Meta)
			}
			var id string // a string: go-sdk's ids are numbers, so none is reused
			if err := json.Unmarshal(gp.ID, &id); err != nil || id == "" {
				t.Errorf("id %s is not a string", gp.ID)
			}

			// The answer goes out with tasks/update (go-sdk); polls see it through.
			if _, err := e.tracker.Answer(context.Background(), rec.ID, map[string]json.RawMessage{
				"approve-1": json.RawMessage(`{"action":"accept","content":{"approve":true,"reason":"ok"}}`)}); err != nil {
				t.Fatal(err)
			}
			final := res.Task
			for range 200 {
				if final = e.poll(t, rec.ID).Task; final.Status.Terminal() {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			if final.Status != model.StatusCompleted || !strings.Contains(string(final.Result), "approved") {
				t.Fatalf("final: %s %s", final.Status, final.Result)
			}

			// Sequential requests reuse the idle connection.
			sess, err := e.pool.Session(context.Background(), e.ref)
			if err != nil {
				t.Fatal(err)
			}
			e.rec.mu.Lock()
			connsBefore := e.rec.conns
			e.rec.mu.Unlock()
			for range 5 {
				if snap, err := sess.GetTask(context.Background(), rec.TaskID); err != nil || snap.Status != model.StatusCompleted {
					t.Fatalf("tasks/get of the finished task: %v, %v", snap, err)
				}
			}
			e.rec.mu.Lock()
			newConns := e.rec.conns - connsBefore
			e.rec.mu.Unlock()
			if newConns > 1 { // the first may find go-sdk still reading its last stream
				t.Errorf("5 sequential tasks/get opened %d new connections; the idle one should be reused", newConns)
			}
			if _, err := sess.GetTask(context.Background(), "no-such-task"); !errors.Is(err, mcpclient.ErrTaskUnknown) {
				t.Errorf("unknown task: %v, want ErrTaskUnknown", err)
			}
		})
	}
}

// answerProxy forwards everything to a real demo server except tasks/get,
// which the current fake answers: faults a real server does not produce.
type answerProxy struct {
	rp *httputil.ReverseProxy

	mu        sync.Mutex
	fake      func(w http.ResponseWriter, id json.RawMessage, taskID string)
	discovers int
}

func (p *answerProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	var msg params
	_ = json.Unmarshal(body, &msg)
	p.mu.Lock()
	fake := p.fake
	if msg.Method == "server/discover" {
		p.discovers++
	}
	p.mu.Unlock()
	if msg.Method == wire.MethodGet && fake != nil {
		fake(w, msg.ID, msg.Params.TaskID)
		return
	}
	p.rp.ServeHTTP(w, r)
}

func writeJSON(w http.ResponseWriter, status int, v string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	io.WriteString(w, v)
}

func writeSSE(w http.ResponseWriter, events ...string) {
	w.Header().Set("Content-Type", "text/event-stream")
	for _, e := range events {
		io.WriteString(w, e)
		http.NewResponseController(w).Flush()
	}
}

// Its lastUpdatedAt is later than the real server's: an older report would
// be stale, and rightly ignored (model.Task.Stale).
func workingResult(id json.RawMessage, taskID string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"resultType":"complete","taskId":%q,"status":"working","statusMessage":"fake","createdAt":"2026-01-01T00:00:00Z","lastUpdatedAt":"2099-01-01T00:00:00Z","ttlMs":null}}`, id, taskID)
}

// Every answer a server may give to tasks/get over HTTP ends as the typed
// error callers already know (or a result), never a panic; failures of a
// single POST keep the session (no new server/discover).
func TestPollAnswersOverHTTP(t *testing.T) {
	// streamEnded is set when the fake that holds its stream open lets
	// go; one per run, as a handler outlives its test.
	var streamEnded atomic.Bool
	d := demo.New(demo.Options{PollInterval: 20 * time.Millisecond})
	upstream := httptest.NewServer(d.Handler())
	target, _ := url.Parse(upstream.URL)
	proxy := &answerProxy{rp: httputil.NewSingleHostReverseProxy(target)}
	srv := httptest.NewServer(proxy)
	cfg, err := mcpconfig.ParseConfig("p.json", fmt.Appendf(nil, `{"mcpServers":{"demo":{"url":%q}}}`, srv.URL+"/mcp"))
	if err != nil {
		t.Fatal(err)
	}
	st, err := badger.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	pool := mcpclient.NewPool(mcpclient.PoolOptions{Config: cfg})
	tracker := newTracker(st, pool, trackerOptions{Policy: trackerPolicy, RequestTimeout: waitfor.Scale(5 * time.Second)})
	defer func() {
		pool.Close()
		st.Close()
		srv.Close()
		upstream.Close()
		d.Close()
	}()

	huge := strings.Repeat("x", 17<<20)
	transport := func(want string) func(*testing.T, pollResult) {
		return func(t *testing.T, res pollResult) {
			var te *mcpclient.TransportError
			if !errors.As(res.Err, &te) || !te.Transient || !strings.Contains(res.Err.Error(), want) {
				t.Errorf("got %v; want a transient TransportError saying %q", res.Err, want)
			}
		}
	}
	cases := []struct {
		name  string
		fake  func(w http.ResponseWriter, id json.RawMessage, taskID string)
		check func(*testing.T, pollResult)
	}{
		{"-32602 with HTTP 200", func(w http.ResponseWriter, id json.RawMessage, _ string) {
			writeJSON(w, 200, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32602,"message":"Task has expired"}}`, id))
		}, func(t *testing.T, res pollResult) {
			if res.Err != nil || res.Task.Status != model.StatusUnknown {
				t.Errorf("got %s, %v; want the task unknown", res.Task.Status, res.Err)
			}
		}},
		{"-32022 with HTTP 400", func(w http.ResponseWriter, id json.RawMessage, _ string) {
			writeJSON(w, 400, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32022,"message":"Unsupported protocol version","data":{"supported":["2025-11-25"],"requested":"2026-07-28"}}}`, id))
		}, func(t *testing.T, res pollResult) {
			var ve *mcpclient.VersionError
			if !errors.As(res.Err, &ve) || len(ve.Supported) != 1 || ve.Supported[0] != "2025-11-25" {
				t.Errorf("got %v; want a VersionError listing 2025-11-25", res.Err)
			}
		}},
		{"-32020 as an SSE error event", func(w http.ResponseWriter, id json.RawMessage, _ string) {
			writeSSE(w, fmt.Sprintf("event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":%s,\"error\":{\"code\":-32020,\"message\":\"header\\nmismatch\"}}\n\n", id))
		}, func(t *testing.T, res pollResult) {
			var se *mcpclient.ServerError
			if !errors.As(res.Err, &se) || se.Code != -32020 || se.Message != "header mismatch" {
				t.Errorf("got %#v; want ServerError -32020 with its message on one line", res.Err)
			}
		}},
		{"SSE with a notification, a priming event and split data first", func(w http.ResponseWriter, id json.RawMessage, taskID string) {
			resp := workingResult(id, taskID)
			half := strings.Index(resp, `"result":`) + len(`"result":`) // between tokens: the joining newline is whitespace
			writeSSE(w, "id: 1\ndata:\n\n", ": a comment\n\n",
				"event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"hi\"}}\n\n",
				"event: other\ndata: {\"jsonrpc\":\"2.0\",\"id\":"+string(id)+",\"result\":{}}\n\n",
				"event: message\r\ndata: "+resp[:half]+"\r\ndata:"+resp[half:]+"\r\n\r\n")
		}, func(t *testing.T, res pollResult) {
			if res.Err != nil || res.Task.Status != model.StatusWorking || res.Task.StatusMessage != "fake" {
				t.Errorf("got %s %q, %v; want the faked working task", res.Task.Status, res.Task.StatusMessage, res.Err)
			}
		}},
		{"SSE that ends without a response", func(w http.ResponseWriter, _ json.RawMessage, _ string) {
			writeSSE(w, "id: 1\ndata:\n\n")
		}, transport("without a response")},
		{"a response to another request", func(w http.ResponseWriter, _ json.RawMessage, taskID string) {
			writeJSON(w, 200, workingResult(json.RawMessage(`"other"`), taskID))
		}, transport("not the response")},
		{"a null result", func(w http.ResponseWriter, id json.RawMessage, _ string) {
			writeJSON(w, 200, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":null}`, id))
		}, transport("not the response")},
		{"HTML with HTTP 200", func(w http.ResponseWriter, _ json.RawMessage, _ string) {
			w.Header().Set("Content-Type", "text/html")
			io.WriteString(w, "<html>login</html>")
		}, transport(`unsupported content type "text/html"`)},
		{"plain text with HTTP 400", func(w http.ResponseWriter, _ json.RawMessage, _ string) {
			http.Error(w, "\x1b[31mbad", http.StatusBadRequest)
		}, transport("HTTP 400 Bad Request")},
		{"503 with Retry-After and a JSON-RPC error", func(w http.ResponseWriter, id json.RawMessage, _ string) {
			w.Header().Set("Retry-After", "2")
			writeJSON(w, 503, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32603,"message":"busy"}}`, id))
		}, func(t *testing.T, res pollResult) {
			var te *mcpclient.TransportError
			if !errors.As(res.Err, &te) || te.RetryAfter != 2*time.Second {
				t.Errorf("got %v; want a TransportError asking for 2 s", res.Err)
			}
		}},
		{"not JSON", func(w http.ResponseWriter, id json.RawMessage, _ string) {
			writeJSON(w, 200, `{"jsonrpc":"2.0","id":`+string(id)+`,"result":{"taskId":`)
		}, transport("decoding the tasks/get response")},
		{"17 MiB of JSON", func(w http.ResponseWriter, _ json.RawMessage, _ string) {
			writeJSON(w, 200, `{"x":"`+huge+`"}`)
		}, transport("larger than 16 MiB")},
		{"a 17 MiB SSE line", func(w http.ResponseWriter, _ json.RawMessage, _ string) {
			writeSSE(w, "data: "+huge+"\n\n")
		}, transport("larger than 16 MiB")},
		{"a stream kept open after the response", func(w http.ResponseWriter, id json.RawMessage, taskID string) {
			writeSSE(w, "data: "+workingResult(id, taskID)+"\n\n")
			time.Sleep(3 * time.Second)
			streamEnded.Store(true)
		}, func(t *testing.T, res pollResult) {
			if streamEnded.Load() {
				t.Error("the poll waited for the server to end the stream")
			}
			if res.Err != nil || res.Task.Status != model.StatusWorking {
				t.Errorf("got %s, %v; want the faked working task", res.Task.Status, res.Err)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			proxy.mu.Lock()
			proxy.fake = nil
			proxy.mu.Unlock()
			rec, _, err := tupled(tracker.Call(context.Background(), callRequest{
				Server: model.ServerRef{Name: "demo"}, Tool: "sleep", Args: json.RawMessage(`{"seconds":60}`)}))
			if err != nil {
				t.Fatal(err)
			}
			proxy.mu.Lock()
			proxy.fake = c.fake
			proxy.mu.Unlock()
			res, err := tracker.Poll(context.Background(), rec.ID)
			if err != nil {
				t.Fatal(err)
			}
			c.check(t, res)
		})
	}
	proxy.mu.Lock()
	defer proxy.mu.Unlock()
	if proxy.discovers != 1 {
		t.Errorf("%d server/discover requests: a failed tasks/get dropped the session", proxy.discovers)
	}
}

// A server without the tasks extension answers tasks/get with -32601 and
// HTTP 404: the caller hears ErrNoTasks, as over go-sdk.
func TestPollServerWithoutTasks(t *testing.T) {
	s := mcp.NewServer(&mcp.Implementation{Name: "plain", Version: "1"}, nil)
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s },
		&mcp.StreamableHTTPOptions{Stateless: true}))
	defer srv.Close()
	cfg, err := mcpconfig.ParseConfig("p.json", fmt.Appendf(nil, `{"mcpServers":{"plain":{"url":%q}}}`, srv.URL+"/mcp"))
	if err != nil {
		t.Fatal(err)
	}
	pool := mcpclient.NewPool(mcpclient.PoolOptions{Config: cfg})
	defer pool.Close()
	sess, err := pool.Session(context.Background(), model.ServerRef{Name: "plain"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sess.GetTask(context.Background(), "any"); !errors.Is(err, mcpclient.ErrNoTasks) {
		t.Errorf("got %v; want ErrNoTasks", err)
	}
}
