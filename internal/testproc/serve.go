package testproc

import (
	"bytes"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/internal/waitfor"
)

// ServeOnPorts starts a server a test needs (Prometheus, Jaeger) on n
// distinct free loopback addresses ("127.0.0.1:PORT"): start makes its
// command for them and the URL that answers 200 once it is ready. It runs
// in a group of its own (Group), and ServeOnPorts returns the addresses
// once that URL answers (30 s scaled). A port is free only until something
// binds it, and a parallel test's outgoing connection may take it before
// the server does: a server that exits saying an address is in use is
// started again on other ports, up to 5 times. At the test's end it is
// sent SIGTERM, then its group is killed after 10 s (scaled); a failed
// test prints the tail of what it wrote.
func ServeOnPorts(t testing.TB, n int, name string, start func(addrs []string) (cmd *exec.Cmd, readyURL string)) []string {
	t.Helper()
	for attempt := 1; ; attempt++ {
		addrs, err := freeAddrs(n)
		if err != nil {
			t.Fatal(err)
		}
		cmd, readyURL := start(addrs)
		inUse := serve(t, cmd, name, readyURL)
		if !inUse {
			return addrs
		}
		if attempt == 5 {
			t.Fatalf("%s: an address it was given was in use, %d times", name, attempt)
		}
		t.Logf("%s: an address it was given was taken meanwhile; starting it again on other ports", name)
	}
}

// freeAddrs returns n distinct loopback addresses that nothing listened
// on a moment ago: each is held until all are chosen, so that the kernel
// does not hand one out twice.
func freeAddrs(n int) ([]string, error) {
	addrs := make([]string, n)
	for i := range addrs {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		addrs[i] = l.Addr().String()
	}
	return addrs, nil
}

// readyClient asks whether a server is ready; a port held by something
// that never answers (what the port was taken by) must not hang the wait.
var readyClient = &http.Client{Timeout: 2 * time.Second}

// serve starts cmd and waits until readyURL answers 200; inUse is true when
// it exited first saying an address was in use.
func serve(t testing.TB, cmd *exec.Cmd, name, readyURL string) (inUse bool) {
	t.Helper()
	Group(cmd)
	log := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		Stop(cmd, syscall.SIGTERM, waitfor.Scale(10*time.Second), exited)
		if t.Failed() {
			t.Logf("%s log:\n%s", name, log.tail())
		}
	})
	waitfor.Within(t, 30*time.Second, name+" to be ready", func() bool {
		select {
		case <-exited:
			if inUse = strings.Contains(log.tail(), "address already in use"); !inUse {
				t.Fatalf("%s exited: %s", name, log.tail())
			}
			return true
		default:
		}
		resp, err := readyClient.Get(readyURL)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return inUse
}

// lockedBuffer holds what a server writes, read while it writes.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// tail is the last 3,000 bytes written.
func (b *lockedBuffer) tail() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.buf.String()
	return s[max(0, len(s)-3000):]
}
