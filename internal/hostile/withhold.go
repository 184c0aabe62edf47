package hostile

import "net/http"

// Withhold lets the real server take every request for method (a
// tools/call runs: its task is created) and withholds the answer until
// the client hangs up: a client that dies mid-call leaves a task it never
// heard of. On(method, nil) lets later requests through.
func (s *Server) Withhold(method string) {
	s.On(method, func(_ http.ResponseWriter, req *Request) bool {
		s.Upstream(req)
		<-req.HTTP.Context().Done()
		return true
	})
}

// HoldAnswer lets the real server take every request for method (a
// tools/call runs: its task is created) and gives its answer once hold
// returns: a slow answer, held for as long as a test needs and no longer.
func (s *Server) HoldAnswer(method string, hold func()) {
	s.On(method, func(w http.ResponseWriter, req *Request) bool {
		up := s.Upstream(req)
		hold()
		for k, v := range up.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(up.Code)
		_, _ = w.Write(up.Body.Bytes())
		return true
	})
}
