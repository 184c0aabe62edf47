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
	err := s.mcp.Run(ctx, &lineTransport{in: in, out: out})
	if ctx.Err() != nil || errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

type lineTransport struct {
	in  io.Reader
	out io.Writer
}

func (t *lineTransport) Connect(context.Context) (mcp.Connection, error) {
	c := &lineConn{in: t.in, out: t.out, msgs: make(chan jsonrpc.Message), closed: make(chan struct{})}
	go c.readLoop()
	return c, nil
}

// lineConn is an mcp.Connection over newline-delimited JSON that survives
// malformed input.
type lineConn struct {
	in   io.Reader
	out  io.Writer
	wmu  sync.Mutex
	msgs chan jsonrpc.Message // closed when in ends

	closeOnce sync.Once
	closed    chan struct{}
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
			} else {
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
	type errObj struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
	}
	reply := func(id json.RawMessage, code int64, msg string) []byte {
		b, _ := json.Marshal(struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Error   errObj          `json:"error"`
		}{"2.0", id, errObj{code, msg}})
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
