package demo

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/taskdeck/taskdeck/mcpclient/wire"
)

// Handler serves stateless streamable HTTP at any path.
func (s *Server) Handler() http.Handler { return s.http }

func newHTTPHandler(srv *mcp.Server, log *slog.Logger, jsonResponse bool) http.Handler {
	// Stateless is required: go-sdk serves 2026-07-28 over HTTP only then.
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: jsonResponse, Logger: log})
	return nameHeaderCheck(h)
}

// nameHeaderCheck enforces Mcp-Name == params.taskId on tasks/* with a 400
// and -32020, as go-sdk does for tools/call (it does not know tasks/*).
func nameHeaderCheck(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || !isTaskMethod(r.Header.Get("Mcp-Method")) ||
			r.Header.Get("Mcp-Protocol-Version") < wire.ProtocolVersion {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, mcp.DefaultMaxRequestBodyBytes))
		if err != nil {
			http.Error(w, "reading body: "+err.Error(), http.StatusBadRequest)
			return
		}
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				TaskID string `json:"taskId"`
			} `json:"params"`
		}
		// Bodies that do not parse are left to go-sdk to reject.
		if json.Unmarshal(body, &msg) == nil && isTaskMethod(msg.Method) &&
			headerValue(r.Header.Get("Mcp-Name")) != msg.Params.TaskID {
			if len(msg.ID) == 0 {
				msg.ID = json.RawMessage("null")
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": msg.ID, "error": map[string]any{
				"code": wire.CodeHeaderMismatch, "message": "header mismatch: Mcp-Name must carry params.taskId"}})
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		next.ServeHTTP(w, r)
	})
}

func isTaskMethod(m string) bool {
	return m == wire.MethodGet || m == wire.MethodUpdate || m == wire.MethodCancel
}

// headerValue decodes the =?base64?…?= form of a header value.
func headerValue(v string) string {
	inner, ok := strings.CutPrefix(v, "=?base64?")
	if inner, ok2 := strings.CutSuffix(inner, "?="); ok && ok2 {
		if b, err := base64.StdEncoding.DecodeString(inner); err == nil {
			return string(b)
		}
	}
	return v
}
