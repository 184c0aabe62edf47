package hostile

import (
	"net/http"
	"sync"
	"time"
)

// Polls records, per task id, every request for a method (tasks/get)
// with its time and the client that sent it, and how many were in
// flight for one task at once: a fleet test tells from it which engine
// polled a task and whether two polled it at the same moment.
type Polls struct {
	mu       sync.Mutex
	seen     map[string][]Poll
	inFlight map[string]int
	overlap  int // the most requests for one task in flight at once
}

// Poll is one request about a task.
type Poll struct {
	At time.Time
	// From tells the clients apart: the Mcp-Session-Id header (one per
	// client session), or on a stateless server the URL's query.
	From string
}

// RecordPolls answers method through the real server, holding each
// request for hold so that two engines' polls of one task would overlap,
// and records them. As in CountInFlight, a request stops counting before
// its answer leaves.
func (s *Server) RecordPolls(method string, hold time.Duration) *Polls {
	p := &Polls{seen: map[string][]Poll{}, inFlight: map[string]int{}}
	s.On(method, func(w http.ResponseWriter, req *Request) bool {
		p.mu.Lock()
		from := req.Header.Get("Mcp-Session-Id")
		if from == "" { // a stateless server: clients can tell themselves apart by a query
			from = req.HTTP.URL.RawQuery
		}
		p.seen[req.TaskID] = append(p.seen[req.TaskID], Poll{At: time.Now(), From: from})
		p.inFlight[req.TaskID]++
		p.overlap = max(p.overlap, p.inFlight[req.TaskID])
		p.mu.Unlock()
		time.Sleep(hold) // the request's own duration, as a slow server's
		rec := s.Upstream(req)
		p.mu.Lock()
		p.inFlight[req.TaskID]--
		p.mu.Unlock()
		Send(w, rec)
		return true
	})
	return p
}

// Of returns the requests about task id, in order.
func (p *Polls) Of(taskID string) []Poll {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Poll(nil), p.seen[taskID]...)
}

// Overlap is the most requests about one task that were in flight at once.
func (p *Polls) Overlap() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.overlap
}

// Senders counts the distinct clients (From) that sent requests about each task.
func (p *Polls) Senders() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]int, len(p.seen))
	for id, polls := range p.seen {
		set := map[string]bool{}
		for _, q := range polls {
			set[q.From] = true
		}
		out[id] = len(set)
	}
	return out
}
