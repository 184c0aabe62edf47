package demo

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/taskdeck/taskdeck/mcpclient/wire"
)

// maxLine bounds one stdio message.
const maxLine = 4 << 20

// ServeStdio serves newline-delimited JSON-RPC on in/out until in ends,
// ctx ends or Close is called; those are normal ends and return nil. A
// malformed line is answered with a JSON-RPC error and skipped (go-sdk's
// own stdio transport would end the session on it). If in is an io.Closer
// it is closed on return, so that its reader goroutine ends too.
func (s *Server) ServeStdio(ctx context.Context, in io.Reader, out io.Writer) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(s.tasks.root, cancel) // Close ends the session
	defer stop()
	tr := &lineTransport{srv: s, in: in, out: out}
	err := s.mcp.Run(ctx, tr)
	if tr.conn != nil {
		tr.conn.endListens() // and let each write its end first
	}
	if ctx.Err() != nil || errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

type lineTransport struct {
	srv  *Server
	in   io.Reader
	out  io.Writer
	conn *lineConn // set by Connect, which Run calls before it returns
}

func (t *lineTransport) Connect(context.Context) (mcp.Connection, error) {
	c := &lineConn{srv: t.srv, in: t.in, out: t.out, msgs: make(chan jsonrpc.Message), closed: make(chan struct{}),
		listens: map[string]context.CancelFunc{}}
	t.conn = c
	go c.readLoop()
	return c, nil
}

// lineConn is an mcp.Connection over newline-delimited JSON that survives
// malformed input. It serves the listens for task ids itself (push.go).
type lineConn struct {
	srv  *Server
	in   io.Reader
	out  io.Writer
	wmu  sync.Mutex
	msgs chan jsonrpc.Message // closed when in ends

	closeOnce sync.Once
	closed    chan struct{}

	lmu     sync.Mutex
	listens map[string]context.CancelFunc // live listen id (compact JSON) → its end
	lwg     sync.WaitGroup
	ended   bool // set by endListens
}

func (c *lineConn) readLoop() {
	defer close(c.msgs)
	br := bufio.NewReaderSize(c.in, 64<<10)
	for {
		line, tooLong, err := readLine(br)
		if line = bytes.TrimSpace(line); len(line) > 0 || tooLong {
			msg, bad := decodeLine(line, tooLong)
			if bad != nil {
				if c.write(bad) != nil {
					return
				}
			} else if !c.intercept(line, msg) {
				select {
				case c.msgs <- msg:
				case <-c.closed:
					return
				}
			}
		}
		if err != nil {
			return
		}
	}
}

// readLine reads one line, discarding the rest of a line over maxLine.
func readLine(br *bufio.Reader) (line []byte, tooLong bool, err error) {
	for {
		chunk, err := br.ReadSlice('\n')
		if !tooLong {
			if len(line)+len(chunk) > maxLine {
				tooLong, line = true, nil
			} else {
				line = append(line, chunk...)
			}
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return line, tooLong, err
		}
	}
}

// decodeLine decodes one message, or returns the error response for it.
func decodeLine(line []byte, tooLong bool) (jsonrpc.Message, []byte) {
	// The id is the raw null a message that cannot be read is answered
	// with: go-sdk's jsonrpc.Response would leave it out.
	reply := func(id json.RawMessage, code int64, msg string) []byte {
		b, _ := json.Marshal(struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Error   jsonrpc.Error   `json:"error"`
		}{"2.0", id, jsonrpc.Error{Code: code, Message: msg}})
		return b
	}
	null := json.RawMessage("null")
	switch {
	case tooLong:
		return nil, reply(null, jsonrpc.CodeInvalidRequest, "message too long")
	case !json.Valid(line):
		return nil, reply(null, jsonrpc.CodeParseError, "parse error")
	}
	msg, err := jsonrpc.DecodeMessage(line)
	if err != nil {
		return nil, reply(null, jsonrpc.CodeInvalidRequest, "invalid request: "+err.Error())
	}
	return msg, nil
}

func (c *lineConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.closed:
		return nil, io.EOF
	case msg, ok := <-c.msgs:
		if !ok {
			return nil, io.EOF
		}
		return msg, nil
	}
}

func (c *lineConn) Write(_ context.Context, msg jsonrpc.Message) error {
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return err
	}
	return c.write(data)
}

// write sends one line; lines never interleave.
func (c *lineConn) write(data []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err := c.out.Write(append(data, '\n'))
	return err
}

// intercept serves a listen for task ids, or the notifications/cancelled
// that ends one, and reports whether it took the message from go-sdk.
func (c *lineConn) intercept(line []byte, msg jsonrpc.Message) bool {
	req, ok := msg.(*jsonrpc.Request)
	if !ok {
		return false
	}
	switch req.Method {
	case wire.MethodListen:
		l, ok := parseListen(line)
		if !ok {
			return false
		}
		if e := l.check(""); e != nil {
			c.writeMsg(errorMessage(l.id, e))
			return true
		}
		if c.srv.opts.NoPush {
			return false
		}
		key := compactID(l.id)
		ctx, cancel := context.WithCancel(context.Background())
		c.lmu.Lock()
		defer c.lmu.Unlock()
		if c.ended { // the session is over: no stream may start
			cancel()
			return true
		}
		if _, dup := c.listens[key]; dup {
			cancel()
			c.writeMsg(errorMessage(l.id, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "duplicate in-flight request id " + key}))
			return true
		}
		c.listens[key] = cancel
		c.lwg.Go(func() {
			c.srv.serveListen(ctx, l, c.writeMsg)
			c.lmu.Lock()
			delete(c.listens, key)
			c.lmu.Unlock()
			cancel()
		})
		return true
	case "notifications/cancelled":
		var p struct {
			Params struct {
				RequestID json.RawMessage `json:"requestId"`
			} `json:"params"`
		}
		if json.Unmarshal(line, &p) != nil {
			return false
		}
		c.lmu.Lock()
		cancel, ok := c.listens[compactID(p.Params.RequestID)]
		c.lmu.Unlock()
		if ok {
			cancel() // the client asked for the end: no result is sent
		}
		return ok
	}
	return false
}

// endListens ends every listen stream and waits for their last writes.
func (c *lineConn) endListens() {
	c.lmu.Lock()
	c.ended = true
	for _, cancel := range c.listens {
		cancel()
	}
	c.lmu.Unlock()
	c.lwg.Wait()
}

func compactID(id json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, id) != nil {
		return string(id)
	}
	return b.String()
}

func (c *lineConn) writeMsg(msg any) error {
	data, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	return c.write(data)
}

func (c *lineConn) Close() error {
	c.closeOnce.Do(func() {
		close(c.closed)
		if cl, ok := c.in.(io.Closer); ok {
			cl.Close()
		}
	})
	return nil
}

func (c *lineConn) SessionID() string { return "" }
