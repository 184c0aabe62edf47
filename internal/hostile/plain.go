package hostile

import (
	"io"
	"net/http"
)

// HTTPStatus answers with the bare HTTP status code and no JSON-RPC body.
func HTTPStatus(code int) Fault {
	return func(w http.ResponseWriter, req *Request) bool {
		http.Error(w, http.StatusText(code), code)
		return true
	}
}

// NotJSON answers 200 with an application/json body that is not JSON.
func NotJSON() Fault {
	return func(w http.ResponseWriter, req *Request) bool {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, "{this is not json")
		return true
	}
}
