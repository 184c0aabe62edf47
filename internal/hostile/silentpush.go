package hostile

import (
	"bytes"
	"net/http"
	"sync"

	"github.com/taskdeck/taskdeck/mcpclient/wire"
)

// SilentPush makes every subscriptions/listen stream from now on pass the
// real server's acknowledgement and then nothing more, no event and no
// keep-alive, while the connection stays open until the client hangs up:
// a stream that went dead behind a proxy or a stuck server.
// On(wire.MethodListen, nil) removes the fault.
func (s *Server) SilentPush() {
	s.On(wire.MethodListen, func(w http.ResponseWriter, req *Request) bool {
		s.Forward(&muteWriter{w: w}, req)
		<-req.HTTP.Context().Done() // not even the end of the stream
		return true
	})
}

// muteWriter passes a stream's bytes up to the end of its first event
// (the acknowledgement) and swallows the rest.
type muteWriter struct {
	w http.ResponseWriter

	mu    sync.Mutex
	seen  []byte // the first event, while it is incomplete
	muted bool
}

func (m *muteWriter) Header() http.Header { return m.w.Header() }

func (m *muteWriter) WriteHeader(code int) { m.w.WriteHeader(code) }

func (m *muteWriter) Write(b []byte) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.muted {
		return len(b), nil
	}
	pass := b
	m.seen = append(m.seen, b...)
	if i := bytes.Index(m.seen, []byte("\n\n")); i >= 0 {
		pass = b[:len(b)-(len(m.seen)-(i+2))]
		m.muted, m.seen = true, nil
	}
	if _, err := m.w.Write(pass); err != nil {
		return 0, err
	}
	return len(b), nil
}

func (m *muteWriter) Flush() {
	m.mu.Lock()
	defer m.mu.Unlock()
	http.NewResponseController(m.w).Flush()
}
