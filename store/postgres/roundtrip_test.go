package postgres_test

import (
	"bytes"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/taskdeck/taskdeck/internal/pgtest"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store/storetest"
)

// turnCounter relays loopback TCP connections to PostgreSQL and counts
// round trips: the times a client sends after the server last answered.
// The listener's connection (it sent LISTEN) is not counted.
type turnCounter struct {
	ln    net.Listener
	turns atomic.Int64
	wg    sync.WaitGroup
}

func relay(t *testing.T, to string) *turnCounter {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	storetest.Must(t, err)
	r := &turnCounter{ln: ln}
	r.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			r.wg.Go(func() { r.serve(c, to) })
		}
	})
	t.Cleanup(func() { _ = ln.Close(); r.wg.Wait() })
	return r
}

func (r *turnCounter) serve(c net.Conn, to string) {
	defer c.Close()
	s, err := net.Dial("tcp", to)
	if err != nil {
		return
	}
	defer s.Close()
	var answered, listener atomic.Bool
	answered.Store(true)
	r.wg.Go(func() {
		defer c.Close()
		buf := make([]byte, 64<<10)
		for {
			n, err := s.Read(buf)
			if n > 0 {
				answered.Store(true)
				if _, werr := c.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	})
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			if bytes.Contains(buf[:n], []byte("LISTEN ")) {
				listener.Store(true)
			}
			if answered.Swap(false) && !listener.Load() {
				r.turns.Add(1)
			}
			if _, werr := s.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				_ = s.Close()
			}
			return
		}
	}
}

// A durable Create is one round trip to the database, and an Update two
// (its read, then the write), also with a commit hook listening: the
// hook hears the store's own commit without reading it back.
func TestWriteIsOneRoundTrip(t *testing.T) {
	conn := pgtest.DB(t)
	r := relay(t, pgtest.Addr())
	// One pooled connection, so that every statement is prepared once.
	s := open(t, strings.Replace(conn, pgtest.Addr(), r.ln.Addr().String(), 1)+"&pool_max_conns=1")
	var heard storetest.HookLog
	s.SetCommitHook(heard.Hook)
	step := func(t *model.Task) (bool, error) { t.StatusMessage += "."; return true, nil }
	warm := storetest.Intent("", storetest.T0)
	storetest.Must(t, s.Create(warm))
	_, err := s.Update(warm.ID, step)
	storetest.Must(t, err)

	rec := storetest.Intent("", storetest.T0)
	before := r.turns.Load()
	storetest.Must(t, s.Create(rec))
	if n := r.turns.Load() - before; n != 1 {
		t.Errorf("a Create took %d round trips to the database, want 1", n)
	}
	before = r.turns.Load()
	_, err = s.Update(rec.ID, step)
	storetest.Must(t, err)
	if n := r.turns.Load() - before; n != 2 {
		t.Errorf("an Update took %d round trips to the database, want 2 (read, write)", n)
	}
	all := heard.All()
	if len(all) != 4 || all[3].Task == nil || all[3].Task.StatusMessage != "." || all[3].Rev != s.Revision() {
		t.Fatalf("the hook heard %d changes, the last %+v; want 4, the last the update at revision %d", len(all), all[len(all)-1], s.Revision())
	}
	got, err := s.Get(rec.ID)
	storetest.Must(t, err)
	if got.Revision != all[3].Rev || got.StatusMessage != "." {
		t.Fatalf("the database holds revision %d %q, the hook heard %d", got.Revision, got.StatusMessage, all[3].Rev)
	}
}
