package hostile

import (
	"bytes"
	"compress/gzip"
	"net/http"
	"sync"
)

// HugeBody answers with the real server's answer, as one plain
// application/json body padded to about size bytes: a valid answer a
// client that reads bodies whole takes in whole.
func (s *Server) HugeBody(size int64) Fault {
	return func(w http.ResponseWriter, req *Request) bool {
		head, tail, ok := s.paddedAnswer(req)
		if !ok {
			return false
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(head)
		for left := size; left > 0; left -= int64(len(padChunk)) {
			if _, err := w.Write(padChunk); err != nil {
				return true // the client gave up reading
			}
		}
		w.Write(tail)
		return true
	}
}

// GzipBomb answers like HugeBody, but gzip-encoded: a few hundred KiB on
// the wire that inflate to about size bytes.
func (s *Server) GzipBomb(size int64) Fault {
	return func(w http.ResponseWriter, req *Request) bool {
		head, tail, ok := s.paddedAnswer(req)
		if !ok {
			return false
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Encoding", "gzip")
		// A gzip stream may be several members one after the other: the
		// padding is one small member repeated.
		w.Write(gzipped(head))
		member := gzippedPad()
		for left := size; left > 0; left -= padMember {
			if _, err := w.Write(member); err != nil {
				return true
			}
		}
		w.Write(gzipped(tail))
		return true
	}
}

// padChunk is what a huge answer is padded with, inside a JSON string.
var padChunk = bytes.Repeat([]byte("A"), 64<<10)

// padMember is how many bytes one gzip member of padding inflates to.
const padMember = 1 << 20

var gzippedPad = sync.OnceValue(func() []byte { return gzipped(bytes.Repeat([]byte("A"), padMember)) })

func gzipped(b []byte) []byte {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	zw.Write(b)
	zw.Close()
	return buf.Bytes()
}

// paddedAnswer splits the real server's answer to req where padding can
// go: head ends inside a new string field of the result, tail closes it.
func (s *Server) paddedAnswer(req *Request) (head, tail []byte, ok bool) {
	body := s.Upstream(req).Body.Bytes()
	// An SSE answer carries the message on its data line.
	if i := bytes.Index(body, []byte("data: ")); i >= 0 && !bytes.HasPrefix(bytes.TrimSpace(body), []byte("{")) {
		body, _, _ = bytes.Cut(body[i+len("data: "):], []byte("\n"))
	}
	const result = `"result":{`
	i := bytes.Index(body, []byte(result))
	if i < 0 {
		return nil, nil, false
	}
	i += len(result)
	head = append(append([]byte(nil), body[:i]...), `"padding":"`...)
	tail = append([]byte(`",`), body[i:]...)
	return head, tail, true
}
