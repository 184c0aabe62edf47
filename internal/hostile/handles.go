package hostile

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
)

// Faults on task handles and task answers: a CreateTaskResult or a
// tasks/get answer rewritten field by field, and JSON-RPC errors in place
// of the real server's answer.

// Rewrite answers with the real server's answer to the request, its
// result object changed by edit (a field set to json.RawMessage("…")
// replaces it, nil deletes it). An answer with no result (an error)
// passes unchanged. The answer goes out as one application/json body.
func (s *Server) Rewrite(edit func(result map[string]json.RawMessage)) Fault {
	return func(w http.ResponseWriter, req *Request) bool {
		up := s.Upstream(req)
		body := lastMessage(up.Body.Bytes())
		var msg map[string]json.RawMessage
		if json.Unmarshal(body, &msg) != nil || msg["result"] == nil {
			writeJSON(w, up.Code, body)
			return true
		}
		var res map[string]json.RawMessage
		if json.Unmarshal(msg["result"], &res) != nil {
			writeJSON(w, up.Code, body)
			return true
		}
		edit(res)
		for k, v := range res {
			if v == nil {
				delete(res, k)
			}
		}
		msg["result"], _ = json.Marshal(res)
		out, _ := json.Marshal(msg)
		writeJSON(w, http.StatusOK, out)
		return true
	}
}

// Set is an edit for Rewrite that sets fields to raw JSON values.
func Set(fields map[string]string) func(map[string]json.RawMessage) {
	return func(res map[string]json.RawMessage) {
		for k, v := range fields {
			res[k] = json.RawMessage(v)
		}
	}
}

// Error answers with a JSON-RPC error (over HTTP 200, as some servers
// send even -32602) and sends nothing to the real server.
func Error(code int64, message string) Fault {
	return func(w http.ResponseWriter, req *Request) bool {
		id := req.ID
		if len(id) == 0 {
			id = json.RawMessage("null")
		}
		m, _ := json.Marshal(message)
		writeJSON(w, http.StatusOK, fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"error":{"code":%d,"message":%s}}`, id, code, m))
		return true
	}
}

// lastMessage is the JSON-RPC message of an answer: the body itself, or
// the last data line of an SSE stream (the answer comes last).
func lastMessage(body []byte) []byte {
	if t := bytes.TrimSpace(body); len(t) > 0 && t[0] == '{' {
		return t
	}
	var last []byte
	for line := range bytes.Lines(body) {
		if d, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r\n"), []byte("data:")); ok {
			last = bytes.TrimSpace(d)
		}
	}
	return last
}

func writeJSON(w http.ResponseWriter, code int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write(body)
}

// Busy answers HTTP 503 with a Retry-After header of value (any text: a
// number of seconds far too large, a date), and sends nothing on.
func Busy(retryAfter string) Fault {
	return func(w http.ResponseWriter, _ *Request) bool {
		w.Header().Set("Retry-After", retryAfter)
		w.WriteHeader(http.StatusServiceUnavailable)
		return true
	}
}
