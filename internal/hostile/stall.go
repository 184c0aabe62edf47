package hostile

import (
	"net/http"
	"sync"
)

// Stall takes the request and never answers it: the client sees a server
// that accepted the connection and went silent. The handler returns once
// the client hangs up or until is closed, so that the server can stop.
func Stall(until <-chan struct{}) Fault {
	return func(w http.ResponseWriter, req *Request) bool {
		select {
		case <-req.HTTP.Context().Done():
		case <-until:
		}
		return true
	}
}

// Held holds each request for one method until Release, then lets the
// real server answer it; Answered is closed once an answer has been
// written out and flushed to the client.
type Held struct {
	release  chan struct{}
	answered chan struct{}
	once     sync.Once
}

// Hold makes the server hold every request for method (see Held).
func (s *Server) Hold(method string) *Held {
	h := &Held{release: make(chan struct{}), answered: make(chan struct{})}
	s.On(method, func(w http.ResponseWriter, req *Request) bool {
		select {
		case <-h.release:
		case <-req.HTTP.Context().Done():
			return true
		}
		s.Forward(w, req)
		http.NewResponseController(w).Flush()
		h.once.Do(func() { close(h.answered) })
		return true
	})
	return h
}

// Release lets the held requests through.
func (h *Held) Release() { close(h.release) }

// Answered is closed when a held request has been answered.
func (h *Held) Answered() <-chan struct{} { return h.answered }
