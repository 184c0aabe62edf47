package hostile

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// Redirect answers with an HTTP redirect (code 301, 302, 303, 307 or
// 308) to target, the way a hostile or misconfigured front would send a
// client, and the headers it carries, to another host.
func Redirect(code int, target string) Fault {
	return func(w http.ResponseWriter, req *Request) bool {
		w.Header().Set("Location", target)
		w.WriteHeader(code)
		return true
	}
}

// Received is one request a Recorder received.
type Received struct {
	Method, URL string
	Header      http.Header
	Body        []byte
}

// Recorder is a second loopback listener, the target of a redirect: it
// records whatever reaches it and answers every request with -32602 (the
// answer that would make a client forget a task).
type Recorder struct {
	URL string // http://127.0.0.1:PORT

	mu   sync.Mutex
	seen []Received
}

// StartRecorder runs a Recorder on loopback until the test ends.
func StartRecorder(t testing.TB) *Recorder {
	t.Helper()
	r := &Recorder{}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &httptest.Server{Listener: l, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.seen = append(r.seen, Received{Method: req.Method, URL: req.URL.String(), Header: req.Header.Clone(), Body: body})
		r.mu.Unlock()
		var msg struct {
			ID json.RawMessage `json:"id"`
		}
		if json.Unmarshal(body, &msg) != nil || len(msg.ID) == 0 {
			msg.ID = json.RawMessage("1")
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32602,"message":"no such task"}}`, msg.ID)
	})}}
	srv.Start()
	r.URL = srv.URL
	t.Cleanup(srv.Close)
	return r
}

// Received returns every request the recorder received, in order.
func (r *Recorder) Received() []Received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Received(nil), r.seen...)
}
