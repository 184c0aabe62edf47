package hostile

import (
	"net/http"
	"sync"
	"time"
)

// InFlight counts the requests for a method in flight at once, over
// every task: a test of a bound on concurrent requests reads Max.
type InFlight struct {
	mu       sync.Mutex
	now, max int
}

// CountInFlight answers method through the real server, holding each
// request for hold so that concurrent ones overlap, and counts them. A
// request stops counting before its answer leaves: a client that sends
// its next request the moment an answer arrives is not counted twice.
func (s *Server) CountInFlight(method string, hold time.Duration) *InFlight {
	c := &InFlight{}
	s.On(method, func(w http.ResponseWriter, req *Request) bool {
		c.mu.Lock()
		c.now++
		c.max = max(c.max, c.now)
		c.mu.Unlock()
		time.Sleep(hold) // the request's own duration, as a slow server's
		rec := s.Upstream(req)
		c.mu.Lock()
		c.now--
		c.mu.Unlock()
		Send(w, rec)
		return true
	})
	return c
}

// Max is the most requests that were in flight at once.
func (c *InFlight) Max() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.max
}
