// Package hostile is a tasks server that misbehaves on purpose, for tests:
// a real demo server behind a loopback HTTP front that lets a test answer
// chosen JSON-RPC methods itself (a redirect, a gzip bomb, an undecodable
// handle, a foreign task id …) and counts every request it saw. Each kind
// of misbehaviour lives in a file of its own in this package.
package hostile

import (
	"bytes"
	"encoding/json"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/taskdeck/taskdeck/demo"
)

// Request is one POST the server received, as a fault sees it.
type Request struct {
	Method string          // JSON-RPC method ("" if the body did not parse)
	ID     json.RawMessage // JSON-RPC id
	TaskID string          // params.taskId (tasks/*)
	Tool   string          // params.name (tools/call)
	Header http.Header
	Body   []byte
	HTTP   *http.Request // its body already read into Body
}

// Fault may answer a request in place of the real server. It returns
// false to let the request through to the demo server unchanged.
type Fault func(w http.ResponseWriter, req *Request) (handled bool)

// Server is the hostile front and the demo server behind it.
type Server struct {
	URL  string // the MCP endpoint: http://127.0.0.1:PORT/mcp
	Demo *demo.Server

	front *httptest.Server
	real  http.Handler

	mu     sync.Mutex
	faults map[string]Fault // by method; "*" applies to every method
	seen   []Request
}

// Start runs a demo server with opts behind a hostile front on loopback;
// both stop when the test ends.
func Start(t testing.TB, opts demo.Options) *Server {
	t.Helper()
	s := &Server{Demo: demo.New(opts), faults: map[string]Fault{}}
	s.real = s.Demo.Handler()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.front = &httptest.Server{Listener: l, Config: &http.Server{Handler: http.HandlerFunc(s.serve)}}
	s.front.Start()
	s.URL = s.front.URL + "/mcp"
	t.Cleanup(func() {
		s.front.Close()
		s.Demo.Close()
	})
	return s
}

// On makes f answer requests for method ("*": every method) from now on;
// a nil f removes the fault.
func (s *Server) On(method string, f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f == nil {
		delete(s.faults, method)
		return
	}
	s.faults[method] = f
}

// Requests returns every request received for method ("" for all), in order.
func (s *Server) Requests(method string) []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Request
	for _, r := range s.seen {
		if method == "" || r.Method == method {
			out = append(out, r)
		}
	}
	return out
}

// Forward answers req as the real demo server would.
func (s *Server) Forward(w http.ResponseWriter, req *Request) {
	req.HTTP.Body = io.NopCloser(bytes.NewReader(req.Body))
	s.real.ServeHTTP(w, req.HTTP)
}

// Upstream returns the real server's answer to req without sending it, so
// that a fault can rewrite it.
func (s *Server) Upstream(req *Request) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	s.Forward(rec, req)
	return rec
}

// Send writes an answer Upstream recorded to the client.
func Send(w http.ResponseWriter, rec *httptest.ResponseRecorder) {
	maps.Copy(w.Header(), rec.Header())
	w.WriteHeader(rec.Code)
	w.Write(rec.Body.Bytes())
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	req := &Request{Header: r.Header.Clone(), Body: body, HTTP: r}
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			TaskID string `json:"taskId"`
			Name   string `json:"name"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &msg) == nil {
		req.Method, req.ID, req.TaskID, req.Tool = msg.Method, msg.ID, msg.Params.TaskID, msg.Params.Name
	}
	s.mu.Lock()
	s.seen = append(s.seen, *req)
	f := s.faults[req.Method]
	if f == nil {
		f = s.faults["*"]
	}
	s.mu.Unlock()
	if f != nil && f(w, req) {
		return
	}
	s.Forward(w, req)
}
