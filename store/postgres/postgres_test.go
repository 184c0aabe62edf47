package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
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

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

func open(t *testing.T, conn string) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), conn, nil)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Backend { return open(t, pgtest.DB(t)) })
}

func exec(t *testing.T, conn, sql string) {
	t.Helper()
	c, err := pgx.Connect(context.Background(), conn)
	storetest.Must(t, err)
	defer c.Close(context.Background())
	_, err = c.Exec(context.Background(), sql)
	storetest.Must(t, err)
}

// A database whose default is synchronous_commit off still gets every
// write committed with it on.
func TestSynchronousCommitWhateverTheDefault(t *testing.T) {
	conn := pgtest.DB(t)
	var name string
	c, err := pgx.Connect(context.Background(), conn)
	storetest.Must(t, err)
	storetest.Must(t, c.QueryRow(context.Background(), `SELECT current_database()`).Scan(&name))
	_, err = c.Exec(context.Background(), `ALTER DATABASE `+name+` SET synchronous_commit = off`)
	storetest.Must(t, err)
	c.Close(context.Background())
	// A plain connection now gets the database's default...
	c, err = pgx.Connect(context.Background(), conn)
	storetest.Must(t, err)
	var plain string
	storetest.Must(t, c.QueryRow(context.Background(), `SHOW synchronous_commit`).Scan(&plain))
	c.Close(context.Background())
	if plain != "off" {
		t.Fatalf("the database default did not take (%s), so the test cannot fail", plain)
	}
	// ...and every connection of the store has it on.
	s := open(t, conn)
	pool := postgres.Pool(s)
	// Four connections held at once, so they are four, each released
	// before any check (a held one would keep Close waiting).
	var got []string
	var held []func()
	for range 4 {
		pc, err := pool.Acquire(context.Background())
		storetest.Must(t, err)
		held = append(held, pc.Release)
		var v string
		storetest.Must(t, pc.Conn().QueryRow(context.Background(), `SHOW synchronous_commit`).Scan(&v))
		got = append(got, v)
	}
	for _, release := range held {
		release()
	}
	for _, v := range got {
		if v != "on" {
			t.Fatalf("the store's connections have synchronous_commit %v, want on", got)
		}
	}
	storetest.Must(t, s.Create(storetest.Intent("", storetest.T0)))
}

// Two stores on one database stand for two hosts: each hook hears the
// other's commits as well as its own, in order, and a watcher replaying
// them holds the database's records.
func TestHookHearsOtherProcesses(t *testing.T) {
	conn := pgtest.DB(t)
	a, b := open(t, conn), open(t, conn)
	var ha storetest.HookLog
	a.SetCommitHook(ha.Hook)
	rev, snap, err := a.Snapshot()
	storetest.Must(t, err)
	const each = 40
	var wg sync.WaitGroup
	for _, s := range []*postgres.Store{a, b} {
		wg.Go(func() {
			var mine []string
			for i := range each {
				var err error
				switch {
				case i%5 == 4:
					err = s.Delete(mine[0], storetest.Tester)
					mine = mine[1:]
				case i%2 == 1:
					_, err = s.Update(mine[len(mine)-1], func(t *model.Task) (bool, error) {
						t.StatusMessage = fmt.Sprint("step ", i)
						return true, nil
					})
				default:
					rec := storetest.Intent("", storetest.T0)
					err = s.Create(rec)
					mine = append(mine, rec.ID)
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	_, _, err = b.Snapshot()
	storetest.Must(t, err)
	want := b.Revision()
	storetest.WaitFor(t, func() bool { return a.Revision() >= want })
	held := map[string]*model.Task{}
	for _, r := range snap {
		held[r.ID] = r
	}
	last := rev
	for _, c := range ha.All() {
		if c.Rev <= last {
			t.Fatalf("hook heard %d after %d", c.Rev, last)
		}
		last = c.Rev
		if c.Task == nil {
			delete(held, c.ID)
		} else {
			held[c.ID] = c.Task
		}
	}
	if ha.Overlapped() {
		t.Error("two hook calls ran at once")
	}
	all, err := b.All()
	storetest.Must(t, err)
	if len(all) != len(held) || last != want {
		t.Fatalf("the watcher on a holds %d records up to %d; the database %d up to %d", len(held), last, len(all), want)
	}
	for _, r := range all {
		if got := held[r.ID]; got == nil || got.Revision != r.Revision || got.StatusMessage != r.StatusMessage {
			t.Fatalf("watcher holds %+v for %s, the database %+v", got, r.ID, r)
		}
	}
}

// A listener whose connection is cut reconnects and catches up with what
// was committed meanwhile.
func TestHookCatchesUpAfterReconnect(t *testing.T) {
	conn := pgtest.DB(t)
	a, b := open(t, conn), open(t, conn)
	var ha storetest.HookLog
	a.SetCommitHook(ha.Hook)
	first := storetest.Create(t, b, "", model.StatusWorking, storetest.T0)
	storetest.WaitFor(t, func() bool { return ha.Heard(first.ID) })
	// Cut every listening connection (a's and b's), then write at once.
	exec(t, conn, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = current_database() AND query LIKE 'LISTEN%' AND pid <> pg_backend_pid()`)
	second := storetest.Create(t, b, "", model.StatusWorking, storetest.T0)
	storetest.WaitFor(t, func() bool { return ha.Heard(second.ID) })
	if got := ha.All(); got[len(got)-1].Rev != second.Revision {
		t.Fatalf("the hook's last change is %v, want %s at %d", storetest.RevsOf(got), second.ID, second.Revision)
	}
}

// Of two hosts sending one key at once, one records it.
func TestOneKeyAcrossStores(t *testing.T) {
	conn := pgtest.DB(t)
	a, b := open(t, conn), open(t, conn)
	for round := range 10 {
		key := fmt.Sprint("both-", round)
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for i, s := range []*postgres.Store{a, b} {
			wg.Go(func() { errs[i] = s.Create(storetest.Intent(key, storetest.T0)) })
		}
		wg.Wait()
		var dup *store.DuplicateKeyError
		ok := 0
		for _, err := range errs {
			switch {
			case err == nil:
				ok++
			case !errors.As(err, &dup):
				t.Fatalf("round %d: %v, want a DuplicateKeyError", round, err)
			}
		}
		if ok != 1 {
			t.Fatalf("round %d: %d creates won, want 1 (%v)", round, ok, errs)
		}
	}
}

// Engines starting at once on a new database migrate it once.
func TestConcurrentOpenMigratesOnce(t *testing.T) {
	conn := pgtest.DB(t)
	const n = 4
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		wg.Go(func() {
			s, err := postgres.Open(context.Background(), conn, nil)
			if err == nil {
				err = s.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	t.Logf("%d concurrent Opens of a new database took %v", n, time.Since(start))
	for _, err := range errs {
		storetest.Must(t, err)
	}
	c, err := pgx.Connect(context.Background(), conn)
	storetest.Must(t, err)
	defer c.Close(context.Background())
	var applied int
	storetest.Must(t, c.QueryRow(context.Background(), `SELECT count(*) FROM taskdeck_migrations WHERE version_id > 0`).Scan(&applied))
	files, err := filepath.Glob("migrations/*.sql")
	storetest.Must(t, err)
	if applied != len(files) {
		t.Fatalf("%d migrations recorded, want %d, one per file", applied, len(files))
	}
}

// Tombstones older than the last maxTombstones revisions are dropped, and
// replay from before them is refused.
func TestChangesSinceRefusesBelowTheFloor(t *testing.T) {
	postgres.SetMaxTombstones(t, 5)
	s := open(t, pgtest.DB(t))
	var recs []*model.Task
	for range 10 {
		recs = append(recs, storetest.Create(t, s, "", model.StatusCompleted, storetest.T0))
	}
	for _, r := range recs {
		storetest.Must(t, s.Delete(r.ID, storetest.Tester))
	}
	// Revisions 11..20 are the deletions; those up to 15 are dropped.
	if _, _, ok, err := s.ChangesSince(14); err != nil || ok {
		t.Fatalf("ChangesSince(14) below the floor: ok %v, %v; want not ok", ok, err)
	}
	cs, upTo, ok, err := s.ChangesSince(15)
	storetest.Must(t, err)
	if live, dead := storetest.CountLive(cs); !ok || upTo != 20 || live != 0 || dead != 5 {
		t.Fatalf("ChangesSince(15): ok %v up to %d, %d records, %d tombstones; want 5 tombstones up to 20", ok, upTo, live, dead)
	}
}

// A bad connection string and an unreachable database are one-line errors.
func TestOpenErrorsAreOneLine(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), waitfor.Scale(10*time.Second))
	defer cancel()
	for _, conn := range []string{"postgres://u:secret@127.0.0.1:1/x?connect_timeout=2", "::not a url"} {
		_, err := postgres.Open(ctx, conn, nil)
		if err == nil {
			t.Fatalf("Open(%q) succeeded", conn)
		}
		msg := err.Error()
		if len(msg) == 0 || containsAny(msg, "\n", "secret") {
			t.Fatalf("Open(%q) = %q: want one line without the password", conn, msg)
		}
	}
}

func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		for i := 0; i+len(sub) <= len(s); i++ {
			if s[i:i+len(sub)] == sub {
				return true
			}
		}
	}
	return false
}

// With the database down a call fails with one line and records nothing;
// once it is back calls work again and the hook hears another host's
// commits through the listener's reconnect.
func TestLostDatabase(t *testing.T) {
	conn := pgtest.DB(t)
	a, b := open(t, conn), open(t, conn)
	var ha storetest.HookLog
	a.SetCommitHook(ha.Hook)
	before := storetest.Create(t, a, "", model.StatusWorking, storetest.T0)
	lost := storetest.Intent("lost", storetest.T0)
	pgtest.Restart(t, func() {
		err := a.Create(lost)
		if err == nil || strings.Contains(err.Error(), "\n") {
			t.Errorf("Create with the database down: %q; want a one-line error", err)
		}
	})
	after := storetest.Create(t, b, "", model.StatusWorking, storetest.T0)
	storetest.WaitFor(t, func() bool { return ha.Heard(after.ID) })
	if _, err := a.Get(lost.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the Create that failed left %v", err)
	}
	if got, err := a.Get(before.ID); err != nil || got.Revision != before.Revision {
		t.Fatalf("a record from before the outage: %+v, %v", got, err)
	}
	storetest.Must(t, a.Create(storetest.Intent("lost", storetest.T0)))
}
