package hostile

// Calls counts the tools/call requests for tool that reached the front,
// as a test counts what the server was asked.
func (s *Server) Calls(tool string) int {
	n := 0
	for _, r := range s.Requests("tools/call") {
		if r.Tool == tool {
			n++
		}
	}
	return n
}
