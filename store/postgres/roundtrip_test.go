package postgres_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/taskdeck/taskdeck/internal/pgtest"
	"github.com/taskdeck/taskdeck/internal/waitfor"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store"
	"github.com/taskdeck/taskdeck/store/postgres"
	"github.com/taskdeck/taskdeck/store/storetest"
)

// turnCounter relays loopback TCP connections to PostgreSQL and counts
// round trips: the times a client sends after the server last answered.
// The listener's connection (it sent LISTEN) is not counted.
type turnCounter struct {
	ln        net.Listener
	turns     atomic.Int64
	listening atomic.Bool // a connection sent LISTEN
	wg        sync.WaitGroup
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
				r.listening.Store(true)
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

	// The listener connects (and catches up once) beside the first
	// writes: the fewest round trips of three tries are the write's own.
	waitfor.Within(t, 10*time.Second, "the store listens", r.listening.Load)
	fewest := func(op func()) int64 {
		best := int64(1 << 62)
		for range 3 {
			before := r.turns.Load()
			op()
			best = min(best, r.turns.Load()-before)
		}
		return best
	}
	var rec *model.Task
	if n := fewest(func() { rec = storetest.Intent("", storetest.T0); storetest.Must(t, s.Create(rec)) }); n != 1 {
		t.Errorf("a Create took %d round trips to the database, want 1", n)
	}
	if n := fewest(func() { _, err = s.Update(rec.ID, step); storetest.Must(t, err) }); n != 2 {
		t.Errorf("an Update took %d round trips to the database, want 2 (read, write)", n)
	}
	all := heard.All()
	last := all[len(all)-1]
	if len(all) != 8 || last.Task == nil || last.Task.StatusMessage != "..." || last.Rev != s.Revision() {
		t.Fatalf("the hook heard %d changes, the last %+v; want 8, the last the third update at revision %d", len(all), last, s.Revision())
	}
	got, err := s.Get(rec.ID)
	storetest.Must(t, err)
	if got.Revision != last.Rev || got.StatusMessage != "..." {
		t.Fatalf("the database holds revision %d %q, the hook heard %d", got.Revision, got.StatusMessage, last.Rev)
	}
}

// holdCounter takes the revision counter's row lock on a connection of
// its own, so that the store's next commit waits; release lets it go.
func holdCounter(t *testing.T, conn string) (waiting func() bool, release func()) {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, conn)
	storetest.Must(t, err)
	t.Cleanup(func() { _ = c.Close(ctx) })
	tx, err := c.Begin(ctx)
	storetest.Must(t, err)
	_, err = tx.Exec(ctx, `SELECT rev FROM taskdeck_meta FOR UPDATE`)
	storetest.Must(t, err)
	look, err := pgx.Connect(ctx, conn)
	storetest.Must(t, err)
	t.Cleanup(func() { _ = look.Close(ctx) })
	waiting = func() bool {
		var n int
		storetest.Must(t, look.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n))
		return n > 0
	}
	return waiting, func() { storetest.Must(t, tx.Rollback(ctx)) }
}

// behind starts a Create that waits for the counter, then n more writes
// (write(i)) that queue behind it, and lets the counter go once all have
// been asked; it returns their errors, in order.
func behind(t *testing.T, conn string, s *postgres.Store, n int, write func(i int) error) []error {
	t.Helper()
	waiting, release := holdCounter(t, conn)
	first := make(chan error, 1)
	go func() { first <- s.Create(storetest.Intent("", storetest.T0)) }()
	waitfor.Within(t, 10*time.Second, "the first write waits for the counter", waiting)
	errs := make([]error, n)
	var asked sync.WaitGroup
	var wg sync.WaitGroup
	for i := range n {
		asked.Add(1)
		wg.Go(func() {
			asked.Done()
			errs[i] = write(i)
		})
	}
	asked.Wait()
	release()
	wg.Wait()
	storetest.Must(t, <-first)
	return errs
}

// Writes made while a commit is under way share the next one: 63 Creates
// queued behind a commit take one round trip between them, with gapless
// revisions in the order the hook hears them.
func TestConcurrentWritesShareACommit(t *testing.T) {
	conn := pgtest.DB(t)
	r := relay(t, pgtest.Addr())
	s := open(t, strings.Replace(conn, pgtest.Addr(), r.ln.Addr().String(), 1)+"&pool_max_conns=4")
	var heard storetest.HookLog
	s.SetCommitHook(heard.Hook)
	storetest.Must(t, s.Create(storetest.Intent("", storetest.T0))) // prepares the statement
	waitfor.Within(t, 10*time.Second, "the store listens", r.listening.Load)
	storetest.Must(t, s.Create(storetest.Intent("", storetest.T0))) // after the listener's first catch-up
	before := r.turns.Load()
	const n = 63
	for i, err := range behind(t, conn, s, n, func(int) error { return s.Create(storetest.Intent("", storetest.T0)) }) {
		if err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	// The first write alone, then the others in a few batches (on a busy
	// machine a goroutine may reach the queue only after a batch left, and
	// the pool may ping a connection idle for a second): one at a time
	// they take 63 or more.
	if got := r.turns.Load() - before; got > 8 {
		t.Errorf("%d concurrent Creates behind one commit took %d round trips, want at most 8", n, got)
	}
	all := heard.All()
	if len(all) != n+3 {
		t.Fatalf("the hook heard %d changes, want %d", len(all), n+3)
	}
	for i, c := range all {
		if c.Rev != uint64(i+1) || c.Task == nil || c.Task.Revision != c.Rev {
			t.Fatalf("change %d the hook heard is at revision %d (record %v), want %d", i, c.Rev, c.Task, i+1)
		}
	}
	if s.Revision() != n+3 {
		t.Fatalf("the store is at revision %d after %d creates", s.Revision(), n+3)
	}
}

// A write refused in a shared commit fails alone: a taken key, a key the
// database cannot store (not UTF-8) and a stale update (tried again) each
// get their own answer, and the writes beside them commit.
func TestRefusedWriteInASharedCommitFailsAlone(t *testing.T) {
	conn := pgtest.DB(t)
	s := open(t, conn)
	taken := storetest.Intent("taken", storetest.T0)
	storetest.Must(t, s.Create(taken))
	const n = 12
	errs := behind(t, conn, s, n, func(i int) error {
		switch i {
		case 3:
			return s.Create(storetest.Intent("taken", storetest.T0))
		case 6:
			return s.Create(storetest.Intent("bad \xff key", storetest.T0))
		case 9, 10: // the second is stale in a shared commit, and tries again
			_, err := s.Update(taken.ID, func(t *model.Task) (bool, error) { t.StatusMessage += "m"; return true, nil })
			return err
		}
		return s.Create(storetest.Intent(fmt.Sprint("key ", i), storetest.T0))
	})
	var dup *store.DuplicateKeyError
	if !errors.As(errs[3], &dup) || dup.Existing.ID != taken.ID {
		t.Errorf("a create with a taken key answered %v, want the duplicate of %s", errs[3], taken.ID)
	}
	if errs[6] == nil || strings.Contains(errs[6].Error(), "\n") || !strings.Contains(errs[6].Error(), "PostgreSQL store") {
		t.Errorf("a create with a key not in UTF-8 answered %v, want a one-line error of the store", errs[6])
	}
	for i, err := range errs {
		if i != 3 && i != 6 && err != nil {
			t.Errorf("write %d beside the refused ones: %v", i, err)
		}
	}
	all, err := s.All()
	storetest.Must(t, err)
	// taken, the first write and the n-4 creates not refused; one
	// revision each, and one for each update.
	if len(all) != n-2 {
		t.Fatalf("%d records after the shared commit, want %d", len(all), n-2)
	}
	if s.Revision() != n {
		t.Fatalf("the store is at revision %d, want %d: a refused write took one", s.Revision(), n)
	}
	if got, err := s.Get(taken.ID); err != nil || got.StatusMessage != "mm" {
		t.Fatalf("the two updates beside the refused writes left %+v (%v)", got, err)
	}
}

// A lone write refused (a taken key, a taken id, a fenced update whose
// claim moved on) takes no revision: the database's counter and the
// store's stay put, the hook hears nothing, and the next write takes the
// next revision.
func TestRefusedLoneWriteTakesNoRevision(t *testing.T) {
	conn := pgtest.DB(t)
	s := open(t, conn)
	var heard storetest.HookLog
	s.SetCommitHook(heard.Hook)
	taken := storetest.Intent("taken", storetest.T0)
	storetest.Must(t, s.Create(taken))
	claims, err := s.ClaimTasks("engine-a", []string{"demo"}, 1, time.Minute)
	storetest.Must(t, err)
	if len(claims) != 1 {
		t.Fatalf("claimed %v, want the one task", claims)
	}
	stale := claims[0]
	stale.Fence++ // a claim some other engine has since taken over
	sameID := storetest.Intent("another key", storetest.T0)
	sameID.ID = taken.ID
	counter := func() (rev uint64) {
		storetest.Must(t, postgres.Pool(s).QueryRow(context.Background(), `SELECT rev FROM taskdeck_meta`).Scan(&rev))
		return rev
	}
	refused := []struct {
		what  string
		write func() error
		want  func(error) bool
	}{
		{"a create with a taken key", func() error { return s.Create(storetest.Intent("taken", storetest.T0)) },
			func(err error) bool { var dup *store.DuplicateKeyError; return errors.As(err, &dup) }},
		{"a create with a taken id", func() error { return s.Create(sameID) },
			func(err error) bool { return err != nil && strings.Contains(err.Error(), "already exists") }},
		{"an update whose claim moved on", func() error {
			_, err := s.UpdateClaimed(stale, func(t *model.Task) (bool, error) { t.StatusMessage = "late"; return true, nil })
			return err
		}, func(err error) bool { return errors.Is(err, store.ErrFenced) }},
	}
	for _, r := range refused {
		err := r.write()
		if !r.want(err) {
			t.Fatalf("%s answered %v", r.what, err)
		}
		if got := counter(); got != 1 || s.Revision() != 1 {
			t.Fatalf("after %s (%v) the database's counter is at %d, the store's at %d; want both at 1", r.what, err, got, s.Revision())
		}
	}
	next := storetest.Intent("", storetest.T0)
	storetest.Must(t, s.Create(next))
	all := heard.All()
	if next.Revision != 2 || len(all) != 2 || all[1].Rev != 2 {
		t.Fatalf("the next write is at revision %d and the hook heard %+v; want revision 2, the second change heard", next.Revision, all)
	}
}

// A lone write's statement is planned once per connection and then run
// from its generic plan: a plan for each write (as a statement whose plan
// depends on its arguments gets) costs more than the write.
func TestLoneWritesArePlannedOnce(t *testing.T) {
	s := open(t, pgtest.DB(t)+"&pool_max_conns=1")
	const n = 20
	var recs []*model.Task
	for range n {
		rec := storetest.Intent("", storetest.T0)
		storetest.Must(t, s.Create(rec))
		recs = append(recs, rec)
	}
	for _, rec := range recs {
		_, err := s.Update(rec.ID, func(t *model.Task) (bool, error) { t.StatusMessage = "next"; return true, nil })
		storetest.Must(t, err)
	}
	// One connection: the pool's statements are this session's.
	rows, err := postgres.Pool(s).Query(context.Background(), `SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements
		WHERE statement LIKE 'WITH m AS (%UPDATE taskdeck_meta SET rev = rev + 1%'`)
	storetest.Must(t, err)
	type plans struct {
		sql             string
		generic, custom int64
	}
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (p plans, err error) {
		return p, r.Scan(&p.sql, &p.generic, &p.custom)
	})
	storetest.Must(t, err)
	if len(got) != 2 {
		t.Fatalf("%d prepared write statements, want 2 (create, update): %+v", len(got), got)
	}
	for _, p := range got {
		if p.custom > 5 || p.generic < n-5 {
			t.Errorf("a write statement ran %d times from a plan of its own and %d from the generic one, want at most 5 and at least %d: %.60q",
				p.custom, p.generic, n-5, p.sql)
		}
	}
}
