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
