package proxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
)

// ServeStdio serves one agent that launched taskdeck as its server, over
// newline-delimited JSON-RPC on in and out, for the configured server
// name. Requests are served concurrently (a held call does not block the
// others); notifications/cancelled ends the request it names, whose task
// goes on. It returns when in ends or ctx does, after the requests in
// flight have answered.
func (p *Proxy) ServeStdio(ctx context.Context, name string, in io.Reader, out io.Writer) error {
	cfg, ok := p.server(name)
	if !ok {
		return fmt.Errorf("no server %s in the config; the servers are: %s", quote(name), p.names())
	}
	ep := &endpoint{p: p, cfg: cfg}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	var wmu sync.Mutex
	write := func(b []byte) {
		wmu.Lock()
		defer wmu.Unlock()
		out.Write(append(b, '\n'))
	}
	var wg sync.WaitGroup
	var imu sync.Mutex
	inflight := map[string]context.CancelFunc{}

	sc := bufio.NewScanner(in)
	sc.Buffer(nil, int(p.opts.MaxBody))
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		req, bad := parse(line)
		if bad != nil {
			write(bad.encode())
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
		body := bytes.Clone(line)
		rctx, stop := context.WithCancel(ctx)
		key := string(req.ID)
		if !req.notification() {
			imu.Lock()
			inflight[key] = stop
			imu.Unlock()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				imu.Lock()
				delete(inflight, key)
				imu.Unlock()
				stop()
			}()
			for _, m := range ep.serveOne(withNotifier(rctx, write), req, body) {
				write(m)
			}
		}()
	}
	err := sc.Err()
	if err == bufio.ErrTooLong {
		write(fail(nil, codeInvalidRequest, "a message is larger than the proxy's bound of "+size(p.opts.MaxBody)+"; send less").encode())
	}
	wg.Wait()
	return err
}

// serveOne answers one request that came over stdio: the messages to
// write back (none for a notification).
func (ep *endpoint) serveOne(ctx context.Context, req *request, body []byte) [][]byte {
	h := synthesized(req)
	if ep.local(req.Method) {
		res := ep.handle(ctx, req, h)
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
