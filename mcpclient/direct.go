package mcpclient

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	segjson "github.com/segmentio/encoding/json"
	"github.com/taskdeck/taskdeck/mcpclient/wire"
)

// maxResponseBytes bounds what one tasks/get answer may make us read: the
// bound go-sdk puts on one SSE event.
const maxResponseBytes = mcp.DefaultMaxEventSize

// directGet sends tasks/get over streamable HTTP without go-sdk's session
// layer: the poll is most of what taskdeck sends, and one POST through
// go-sdk (JSON-RPC connection, its read and write goroutines, SSE and
// generic decoding) cost more than the request itself. The request is the
// one go-sdk sends, through the same http.Client, so the configured
// headers, Mcp-Name, Retry-After and the idle connections still apply.
type directGet struct {
	client  *http.Client
	headers *headerTransport // client's; set here, so it need not clone
	url     string
	meta    json.RawMessage // the per-request _meta go-sdk sends
}

// directIDs numbers the direct requests of this process. Their ids are
// strings ("td-get-N"): go-sdk numbers its own requests with integers
// from 1 on each connection, so no two requests of the process share one.
var directIDs atomic.Int64

const directIDPrefix = "td-get-"

// requestError is a direct request that got no JSON-RPC answer. It holds
// no session state, so the session stays usable (TransportError.Transient).
type requestError struct{ err error }

func (e *requestError) Error() string { return e.err.Error() }
func (e *requestError) Unwrap() error { return e.err }

func failed(format string, args ...any) error {
	return &requestError{fmt.Errorf(format, args...)}
}

// get sends one tasks/get. Errors are a *jsonrpc.Error when the server
// answered with one, for classify to map like go-sdk's.
func (d *directGet) get(ctx context.Context, taskID string) (*wire.GetTaskResult, error) {
	id := directIDs.Add(1)
	resp, err := d.post(ctx, wire.MethodGet, d.body(id, taskID, traceMeta(ctx, d.meta)), taskID)
	if err != nil {
		return nil, err
	}
	defer drainAndClose(resp.Body)
	return readAnswer(resp, id)
}

// post sends one JSON-RPC request as go-sdk would: its headers, the
// configured ones (Mcp-Name when taskID is set), through the client that
// refuses redirects. An error is a *requestError.
func (d *directGet) post(ctx context.Context, method string, body []byte, taskID string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.url, bytes.NewReader(body))
	if err != nil {
		return nil, &requestError{err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", wire.ProtocolVersion)
	req.Header.Set("Mcp-Method", method)
	d.headers.setHeaders(req.Header, taskID)
	resp, err := d.client.Do(req)
	if err != nil {
		return nil, &requestError{fmt.Errorf("%s: %w", method, err)}
	}
	return resp, nil
}

// drainAndClose reads what is left of a body, so that its connection goes
// back to the idle pool, but soon gives up on a stream kept open.
func drainAndClose(body io.ReadCloser) {
	stop := time.AfterFunc(100*time.Millisecond, func() { body.Close() })
	_, _ = io.Copy(io.Discard, io.LimitReader(body, 64<<10))
	stop.Stop()
	body.Close()
}

// body is the JSON-RPC request, as go-sdk would encode it, with meta
// (d.meta with the trace context) as its _meta.
func (d *directGet) body(id int64, taskID string, meta json.RawMessage) []byte {
	quoted, _ := json.Marshal(taskID) // a string always encodes
	b := make([]byte, 0, 96+len(meta)+len(quoted))
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = appendID(b, id)
	b = append(b, `,"method":"tasks/get","params":{"_meta":`...)
	b = append(b, meta...)
	b = append(b, `,"taskId":`...)
	b = append(b, quoted...)
	return append(b, "}}"...)
}

// readAnswer reads the response to request id, whether the server sent
// one JSON body or an SSE stream.
func readAnswer(resp *http.Response, id int64) (*wire.GetTaskResult, error) {
	body := &boundedReader{r: resp.Body, left: maxResponseBytes, method: wire.MethodGet}
	if err := checkStatus(resp, body, wire.MethodGet); err != nil {
		return nil, err
	}
	ctype, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch ctype {
	case "application/json":
		raw, err := io.ReadAll(body)
		if err != nil {
			return nil, &requestError{err}
		}
		msg, err := decodeMessage(raw)
		if err != nil {
			return nil, err
		}
		if !msg.answers(id) {
			return nil, failed("the server's answer is not the response to tasks/get")
		}
		return msg.answer()
	case "text/event-stream":
		return readEvents(body, id)
	}
	return nil, failed("unsupported content type %q", ctype)
}

// checkStatus turns a non-2xx answer into an error as go-sdk does: 429
// and 5xx are transport failures (their Retry-After is kept), other
// statuses carry the server's JSON-RPC error when the body has one.
func checkStatus(resp *http.Response, body io.Reader, method string) error {
	code := resp.StatusCode
	if code >= 200 && code < 300 {
		return nil
	}
	if code != http.StatusTooManyRequests && code < 500 {
		if raw, err := io.ReadAll(body); err == nil {
			if msg, err := decodeMessage(raw); err == nil && msg.Error != nil {
				return msg.Error
			}
		}
	}
	return failed("%s: HTTP %d %s", method, code, http.StatusText(code))
}

// message is the part of a JSON-RPC message a tasks/get caller reads.
type message struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Result *getResult      `json:"result"`
	Error  *jsonrpc.Error  `json:"error"`
}

// getResult is wire.GetTaskResult less its _meta, which nothing reads
// and which would cost a map per poll to decode.
type getResult struct {
	ResultType string `json:"resultType"`
	wire.DetailedTask
}

// maxDepth bounds how deeply a server's answer may nest, as go-sdk does:
// segmentio's decoder recurses without a limit.
const maxDepth = 1000

// decodeMessage decodes with segmentio's decoder, several times faster
// than encoding/json on an answer. When it refuses one, encoding/json
// decides, so nothing accepted before is refused now and errors read as
// they did.
func decodeMessage(raw []byte) (*message, error) {
	if tooDeep(raw, maxDepth) {
		return nil, failed("decoding the tasks/get response: %w: nested deeper than %d", wire.ErrInvalid, maxDepth)
	}
	var msg message
	if segjson.Unmarshal(raw, &msg) == nil {
		return &msg, nil
	}
	msg = message{}
	if err := json.Unmarshal(raw, &msg); err != nil {
		return nil, failed("decoding the tasks/get response: %w: %v", wire.ErrInvalid, err)
	}
	return &msg, nil
}

// tooDeep tells whether the arrays and objects in raw nest deeper than
// max. It only counts brackets outside strings; whether raw is JSON at
// all is the decoder's to say.
func tooDeep(raw []byte, max int) bool {
	depth := 0
	inString, escaped := false, false
	for _, c := range raw {
		switch {
		case escaped:
			escaped = false
		case inString:
			escaped = c == '\\'
			inString = c != '"'
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			if depth++; depth > max {
				return true
			}
		case c == ']' || c == '}':
			depth--
		}
	}
	return false
}

// answers tells whether the message is the response to request id, not
// a notification or a request from the server.
func (m *message) answers(id int64) bool {
	var want [32]byte
	return m.Method == "" && (m.Result != nil || m.Error != nil) &&
		bytes.Equal(bytes.TrimSpace(m.ID), appendID(want[:0], id))
}

// appendID appends the JSON id of direct request id.
func appendID(b []byte, id int64) []byte {
	b = append(b, `"`+directIDPrefix...)
	b = strconv.AppendInt(b, id, 10)
	return append(b, '"')
}

func (m *message) answer() (*wire.GetTaskResult, error) {
	if m.Error != nil {
		return nil, m.Error
	}
	return &wire.GetTaskResult{ResultType: m.Result.ResultType, DetailedTask: m.Result.DetailedTask}, nil
}

// readEvents reads SSE events until the one that answers request id;
// anything else on the stream (priming events, notifications) is skipped.
func readEvents(body io.Reader, id int64) (*wire.GetTaskResult, error) {
	var msg *message
	err := scanEvents(body, wire.MethodGet, func(data []byte) (bool, error) {
		m, err := decodeMessage(data)
		if err == nil && m.answers(id) {
			msg = m
		}
		return msg != nil, err
	})
	if err != nil {
		return nil, err
	}
	if msg == nil {
		return nil, failed("the tasks/get stream ended without a response")
	}
	return msg.answer()
}

// scanEvents reads the events of method's stream through
// wire.ScanEvents: a read failure is a transport error, yield's error
// is returned as it is.
func scanEvents(r io.Reader, method string, yield func(data []byte) (done bool, err error)) error {
	var yerr error
	err := wire.ScanEvents(r, maxResponseBytes, func(data []byte) bool {
		done, err := yield(data)
		yerr = err
		return done || err != nil
	})
	if yerr != nil {
		return yerr
	}
	var big *wire.EventTooLargeError
	if errors.As(err, &big) {
		err = &tooLargeError{method} // the same words as the body's bound
	}
	if err != nil {
		return &requestError{fmt.Errorf("reading the %s stream: %w", method, err)}
	}
	return nil
}

// tooLargeError is an answer to method that went past maxResponseBytes.
type tooLargeError struct{ method string }

func (e *tooLargeError) Error() string {
	return fmt.Sprintf("the answer to %s is larger than %d MiB; taskdeck reads no more of it", cmp.Or(e.method, "a request"), maxResponseBytes>>20)
}

// boundedReader reads at most left bytes, then fails with a
// *tooLargeError if the body goes on.
type boundedReader struct {
	r      io.Reader
	left   int64
	method string
}

func (b *boundedReader) Read(p []byte) (int, error) {
	if b.left <= 0 {
		var one [1]byte
		if n, err := b.r.Read(one[:]); n == 0 {
			return 0, err
		}
		return 0, &tooLargeError{b.method}
	}
	p = p[:min(int64(len(p)), b.left)]
	n, err := b.r.Read(p)
	b.left -= int64(n)
	return n, err
}
