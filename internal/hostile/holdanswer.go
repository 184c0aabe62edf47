package hostile

import (
	"net/http"
	"sync"
	"sync/atomic"
)

// Gate holds the real server's answers to one method until Release.
type Gate struct {
	open      chan struct{}
	once      sync.Once
	abandoned atomic.Int64
}

// HoldAnswer lets the real server take every request for method (a
// tools/call runs: its task is created) and holds its answer until the
// gate's Release, as a slow server does; then the answer goes to a client
// still waiting for it. (Hold holds the request itself: nothing is
// created.) A client that hangs up meanwhile is counted.
func (s *Server) HoldAnswer(method string) *Gate {
	g := &Gate{open: make(chan struct{})}
	s.On(method, func(w http.ResponseWriter, req *Request) bool {
		rec := s.Upstream(req)
		select {
		case <-g.open:
		case <-req.HTTP.Context().Done():
			g.abandoned.Add(1)
			return true
		}
		Send(w, rec)
		return true
	})
	return g
}

// Release sends the held answers, and later ones at once.
func (g *Gate) Release() { g.once.Do(func() { close(g.open) }) }

// Abandoned counts the requests whose client hung up before Release.
func (g *Gate) Abandoned() int { return int(g.abandoned.Load()) }
