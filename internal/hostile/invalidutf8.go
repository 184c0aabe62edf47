package hostile

import (
	"bytes"
	"net/http"
)

// InvalidUTF8 is the bytes InvalidUTF8Fault plants: the 8-bit CSI and OSC
// introducers (0x9b, 0x9d) and a byte that is never UTF-8 (0xff).
const InvalidUTF8 = "\x9b\x9d\xff"

// InvalidUTF8Fault answers as the real server would, with InvalidUTF8
// planted at the start of every "text" and "statusMessage" string: raw
// bytes that are not UTF-8, which a JSON decoder may pass on as they are.
func (s *Server) InvalidUTF8Fault() Fault {
	return func(w http.ResponseWriter, req *Request) bool {
		up := s.Upstream(req)
		body := up.Body.Bytes()
		for _, field := range []string{`"text":"`, `"statusMessage":"`} {
			body = bytes.ReplaceAll(body, []byte(field), []byte(field+InvalidUTF8))
		}
		for k, v := range up.Header() {
			w.Header()[k] = v
		}
		w.Header().Del("Content-Length")
		w.WriteHeader(up.Code)
		w.Write(body)
		return true
	}
}
