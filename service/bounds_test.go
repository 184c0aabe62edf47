package service

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/internal/waitfor"
)

// lowerConns sets maxConns to n for the test.
func lowerConns(t *testing.T, n int) {
	old := maxConns
	maxConns = n
	t.Cleanup(func() { maxConns = old })
}

// keptAlive is a connection that asked once and stays open, idle.
func keptAlive(t *testing.T, path string) net.Conn {
	t.Helper()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: taskdeck\r\n\r\n", pathPing)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("a kept-alive connection's ping: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return c
}

// Connections a client opened and left idle (kept alive, or never used)
// beyond the bound do not take the owner's descriptors: it holds at most
// maxConns, and commands go on being served.
func TestIdleConnectionsDoNotStarveCommands(t *testing.T) {
	lowerConns(t, 8)
	dir, _, srv, r := serveEngine(t, startDemo(t))
	r.Close()
	for range 3 * maxConns {
		keptAlive(t, srv.Path())
	}
	for range 3 * maxConns {
		c, err := net.Dial("unix", srv.Path()) // says nothing
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	if busy, waiting := srv.connCounts(); busy+waiting > maxConns {
		t.Fatalf("the owner holds %d connections, over its bound of %d", busy+waiting, maxConns)
	}
	// Silent connections count as idle after silentGrace: until then a
	// command may be refused (in one line), never left waiting.
	for i := range 5 {
		waitfor.Within(t, 10*time.Second, fmt.Sprintf("command %d served among idle connections", i), func() bool {
			d, err := Dial(t.Context(), dir)
			if err != nil {
				t.Logf("command %d: %v", i, err)
				return false
			}
			defer d.Close()
			_, err = d.List(t.Context(), deck.Filter{})
			return err == nil
		})
	}
}

// With every connection busy (watchers), a new client is refused in one
// line naming the bound, not left waiting.
func TestBusyOwnerRefusesClearly(t *testing.T) {
	lowerConns(t, 4)
	dir, _, srv, r := serveEngine(t, startDemo(t))
	r.Close()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	for range maxConns {
		d, err := Dial(ctx, dir)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		if _, err := d.Watch(ctx, 0); err != nil {
			t.Fatal(err)
		}
	}
	waitfor.Within(t, 10*time.Second, "the watchers to be served", func() bool {
		busy, _ := srv.connCounts()
		return busy == maxConns
	})
	_, err := Dial(t.Context(), dir)
	if deck.KindOf(err) != deck.KindUnreachable || !strings.Contains(err.Error(), "connections in use") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("Dial of a full owner: %v, want one line naming its bound", err)
	}
}

// A body trickled slower than the bound allows is cut off.
func TestRequestBodyBounds(t *testing.T) {
	old := bodyTimeout
	bodyTimeout = 200 * time.Millisecond
	t.Cleanup(func() { bodyTimeout = old })
	_, _, srv, _ := serveEngine(t, startDemo(t))

	c, err := net.Dial("unix", srv.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: taskdeck\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"id\":", pathGet)
	ended := make(chan struct{})
	go func() {
		io.Copy(io.Discard, c) // until the owner answers and closes, or closes
		close(ended)
	}()
	waitfor.Within(t, 10*time.Second, "the owner to cut off a trickled body", func() bool {
		select {
		case <-ended:
			return true
		default:
			return false
		}
	})

}
