package proxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// ServeStdio serves one agent that launched taskdeck as its server, over
// newline-delimited JSON-RPC on in and out, for the configured server
// name. Requests are served concurrently (a held call does not block the
// others); notifications/cancelled ends the request it names, whose task
// goes on. It returns when in ends or ctx does (then it closes in, if it
// is an io.Closer, to stop the read): the requests in flight are ended
// (their tasks go on in the engine) and have answered. An agent that
// initializes with 2025-11-25 gets that revision's front (legacy.go), on
// a session that is this connection.
func (p *Proxy) ServeStdio(ctx context.Context, name string, in io.Reader, out io.Writer) error {
	pr := p.stdioPrincipal()
	cfg, ok := p.server(name)
	if !ok {
		return fmt.Errorf("no server %s in the config; the servers are: %s", quote(name), p.names(principal{all: true}))
	}
	if !pr.may(name) {
		return fmt.Errorf("agent %s may not use server %s (its servers: %s); add it to the agent's \"servers\" in the config", quote(pr.who.Name), quote(name), p.names(pr))
	}
	ep := &endpoint{p: p, cfg: cfg, who: pr}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if c, ok := in.(io.Closer); ok {
		// A blocked read does not look at ctx: closing in ends it.
		defer context.AfterFunc(ctx, func() { c.Close() })()
	}

	var wmu sync.Mutex
	write := func(b []byte) {
		wmu.Lock()
		defer wmu.Unlock()
		out.Write(append(b, '\n'))
	}
	var wg sync.WaitGroup
	var imu sync.Mutex
	inflight := map[string]context.CancelFunc{}

	lines := make(chan line)
	rerr := make(chan error, 1)
	go func() { rerr <- readLines(ctx, bufio.NewReader(in), p.opts.MaxBody, lines) }()
	var err error
read:
	for {
		var l line
		select {
		case <-ctx.Done():
			break read
		case l = <-lines:
		case err = <-rerr:
			break read
		}
		if l.tooLong {
			write(fail(nil, jsonrpc.CodeInvalidRequest, "a message is larger than the proxy's bound of "+size(p.opts.MaxBody)+"; send less").encode())
			continue
		}
		req, bad := parse(l.b)
		switch {
		case bad != nil && ep.legacy != nil && p.legacy.answered(ep.legacy, l.b):
			continue // the agent's answer to a question relayed to it
		case bad != nil:
			write(bad.encode())
			continue
		case legacyInit(req):
			// The 2025-11-25 front (legacy.go), its session implicit: this
			// connection. Set before any later request is served.
			label, elicit := legacyAgent(req)
			ep.legacy = newLegacySession(label, elicit)
			write(reply(req.ID, ep.initialized()).encode())
			continue
		}
		if req.Method == "notifications/cancelled" {
			var c struct {
				RequestID json.RawMessage `json:"requestId"`
			}
			_ = json.Unmarshal(req.Params, &c)
			imu.Lock()
			if stop, ok := inflight[string(c.RequestID)]; ok {
				stop()
			}
			imu.Unlock()
			continue
		}
		rctx, stop := context.WithCancel(ctx)
		key := string(req.ID)
		if !req.notification() {
			imu.Lock()
			_, dup := inflight[key]
			if !dup {
				inflight[key] = stop
			}
			imu.Unlock()
			if dup {
				stop()
				write(fail(req.ID, jsonrpc.CodeInvalidRequest, "a request with id "+key+" is still in flight; give each request its own id").encode())
				continue
			}
		}
		wg.Add(1)
		ep := *ep // this request's: another initialize may change the loop's
		go func() {
			defer wg.Done()
			defer func() {
				imu.Lock()
				delete(inflight, key)
				imu.Unlock()
				stop()
			}()
			switch s := ep.legacy; {
			case s != nil && req.notification():
				return // notifications/initialized and the like: as over HTTP
			case s != nil && ep.servesLegacy(req.Method):
				write(plain(ep.handleLegacy(withNotifier(acting(rctx, pr, s.label), write), req)).encode())
				return
			}
			for _, m := range ep.serveOne(withNotifier(acting(rctx, pr, req.label()), write), req, l.b) {
				write(m)
			}
		}()
	}
	// The agent is gone (or ctx ended): nobody waits for the held calls.
	stopped := ctx.Err() != nil
	cancel()
	wg.Wait()
	if err == io.EOF || stopped {
		return nil
	}
	return err
}

// line is one message read from stdio, or a message over the bound.
type line struct {
	b       []byte
	tooLong bool
}

// readLines sends each non-empty line of br to lines until br ends (its
// error: io.EOF at the end) or ctx does. A line over max is skipped and
// sent as tooLong, so one oversized message costs only itself.
func readLines(ctx context.Context, br *bufio.Reader, max int64, lines chan<- line) error {
	for {
		var l line
		var err error
		for {
			var chunk []byte
			chunk, err = br.ReadSlice('\n')
			if !l.tooLong && int64(len(l.b)+len(bytes.TrimRight(chunk, "\r\n"))) > max {
				l = line{tooLong: true}
			} else if !l.tooLong {
				l.b = append(l.b, chunk...)
			}
			if err != bufio.ErrBufferFull {
				break
			}
		}
		l.b = bytes.TrimSpace(l.b)
		if len(l.b) > 0 || l.tooLong {
			select {
			case lines <- l:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if err != nil {
			return err
		}
	}
}

// serveOne answers one request that came over stdio: the messages to
// write back (none for a notification).
func (ep *endpoint) serveOne(ctx context.Context, req *request, body []byte) [][]byte {
	h := synthesized(req)
	if ep.local(req.Method) {
		res := ep.handle(traced(ctx, req, nil), req, h)
		if req.notification() {
			return nil
		}
		return [][]byte{res.encode()}
	}
	msgs, bad := ep.exchange(ctx, req, body, h)
	if bad != nil {
		if req.notification() {
			return nil
		}
		return [][]byte{bad.encode()}
	}
	return msgs
}
