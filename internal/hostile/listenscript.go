package hostile

import (
	"fmt"
	"net/http"
)

// ListenScript answers subscriptions/listen with an SSE stream of the
// given JSON-RPC messages, each one event, as a server that pushes what
// it likes would (an acknowledgement of other ids, a notification that
// does not decode, one too large, none at all). Then the stream ends, or,
// with hold, stays open and silent until the client hangs up.
func ListenScript(hold bool, msgs ...string) Fault {
	return func(w http.ResponseWriter, req *Request) bool {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		rc := http.NewResponseController(w)
		for _, m := range msgs {
			if _, err := fmt.Fprintf(w, "event: message\ndata: %s\n\n", m); err != nil {
				return true
			}
		}
		rc.Flush()
		if hold {
			<-req.HTTP.Context().Done()
		}
		return true
	}
}
