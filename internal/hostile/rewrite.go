package hostile

import (
	"encoding/json"
	"net/http"
	"strings"
)

// Rewrite is a fault that lets the real server answer and then changes
// the JSON-RPC result with edit before the client sees it (e.g. a
// tools/list whose ttlMs or schemas differ). The answer goes out as one
// application/json body; an answer without a result goes out unchanged.
func (s *Server) Rewrite(edit func(result map[string]any)) Fault {
	return func(w http.ResponseWriter, req *Request) bool {
		rec := s.Upstream(req)
		body := rec.Body.Bytes()
		if strings.HasPrefix(rec.Header().Get("Content-Type"), "text/event-stream") {
			for line := range strings.Lines(string(body)) {
				if d, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), "data:"); ok {
					body = []byte(strings.TrimSpace(d)) // the last message is the response
				}
			}
		}
		var msg map[string]any
		if json.Unmarshal(body, &msg) != nil {
			w.Header().Set("Content-Type", rec.Header().Get("Content-Type"))
			w.WriteHeader(rec.Code)
			w.Write(rec.Body.Bytes())
			return true
		}
		if result, ok := msg["result"].(map[string]any); ok {
			edit(result)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(rec.Code)
		json.NewEncoder(w).Encode(msg)
		return true
	}
}
