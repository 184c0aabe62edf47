package main

import (
	"database/sql"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	bdb "github.com/dgraph-io/badger/v4"
	_ "github.com/mattn/go-sqlite3"

	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store/badger"
)

// writer is one design under test for the durable handle write.
type writer interface {
	write(rec *model.Task, val []byte) error
	close() error
}

type writeSystem struct {
	name string
	open func(dir string) (writer, error)
}

var writeSystems = []writeSystem{
	{"bare write+fsync (limit)", openBare},
	{"taskdeck store.Create", openTaskdeck},
	{"Badger v4 alone (defaults, SyncWrites): a create's reads and keys", openBadgerAlone},
	{"SQLite rollback journal, synchronous=FULL", func(dir string) (writer, error) { return openSQLite(dir, "DELETE") }},
	{"SQLite WAL, synchronous=FULL", func(dir string) (writer, error) { return openSQLite(dir, "WAL") }},
}

type taskdeckWriter struct{ s *badger.Store }

func openTaskdeck(dir string) (writer, error) {
	s, err := badger.Open(dir, nil)
	return taskdeckWriter{s}, err
}
func (w taskdeckWriter) write(rec *model.Task, _ []byte) error { return w.s.Create(rec) }
func (w taskdeckWriter) close() error                          { return w.s.Close() }

// badgerWriter is the store's engine with none of the store: Badger v4's
// defaults and its own durable commit (SyncWrites), one txn a record with
// the reads and keys of a create that has an idempotency key (the record,
// the key, the status index, a revision). What it costs against the bare
// append is what 1.1 leaves for the rest of the create.
type badgerWriter struct{ db *bdb.DB }

func openBadgerAlone(dir string) (writer, error) {
	db, err := bdb.Open(bdb.DefaultOptions(dir).WithSyncWrites(true).WithLogger(nil))
	return badgerWriter{db}, err
}

func (w badgerWriter) write(rec *model.Task, val []byte) error {
	return w.db.Update(func(txn *bdb.Txn) error {
		for _, k := range []string{"t\x00" + rec.ID, "k\x00" + rec.IdempotencyKey} {
			if _, err := txn.Get([]byte(k)); !errors.Is(err, bdb.ErrKeyNotFound) {
				return fmt.Errorf("read %q: %v", k, err)
			}
		}
		rev := make([]byte, 8)
		binary.BigEndian.PutUint64(rev, uint64(time.Now().UnixNano()))
		for k, v := range map[string][]byte{
			"t\x00" + rec.ID:                               val,
			"k\x00" + rec.IdempotencyKey:                   []byte(rec.ID),
			"s\x00" + string(rec.Status) + "\x00" + rec.ID: nil,
			"r\x00" + rec.ID:                               rev,
		} {
			if err := txn.Set([]byte(k), v); err != nil {
				return err
			}
		}
		return nil
	})
}
func (w badgerWriter) close() error { return w.db.Close() }

// sqliteWriter is the obvious design: one table, the same three keys
// (primary id, unique idempotency key, status index), one autocommit
// INSERT per record, as database/sql with mattn/go-sqlite3 does it.
type sqliteWriter struct {
	db   *sql.DB
	stmt *sql.Stmt
}

func openSQLite(dir, journal string) (writer, error) {
	dsn := fmt.Sprintf("file:%s?_journal_mode=%s&_synchronous=FULL&_busy_timeout=30000",
		filepath.Join(dir, "tasks.db"), journal)
	db, err := sql.Open("sqlite3", dsn)
	if err != nil {
		return nil, err
	}
	_, err = db.Exec(`CREATE TABLE IF NOT EXISTS tasks (
		id TEXT PRIMARY KEY, status TEXT NOT NULL, idem_key TEXT UNIQUE, record BLOB NOT NULL);
		CREATE INDEX IF NOT EXISTS tasks_status ON tasks(status)`)
	if err != nil {
		db.Close()
		return nil, err
	}
	var mode string
	if err := db.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil || !equalFold(mode, journal) {
		db.Close()
		return nil, fmt.Errorf("sqlite journal_mode is %q, want %s (%v)", mode, journal, err)
	}
	stmt, err := db.Prepare("INSERT INTO tasks(id, status, idem_key, record) VALUES(?, ?, ?, ?)")
	if err != nil {
		db.Close()
		return nil, err
	}
	return &sqliteWriter{db, stmt}, nil
}

func equalFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i]|0x20, b[i]|0x20
		if x != y {
			return false
		}
	}
	return true
}

func (w *sqliteWriter) write(rec *model.Task, val []byte) error {
	_, err := w.stmt.Exec(rec.ID, string(rec.Status), rec.IdempotencyKey, val)
	return err
}
func (w *sqliteWriter) close() error { w.stmt.Close(); return w.db.Close() }

// bareWriter is the physical limit: append the record's bytes to one file
// and fsync it.
type bareWriter struct{ f *os.File }

func openBare(dir string) (writer, error) {
	f, err := os.OpenFile(filepath.Join(dir, "log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	return bareWriter{f}, err
}
func (w bareWriter) write(_ *model.Task, val []byte) error {
	if _, err := w.f.Write(val); err != nil {
		return err
	}
	return w.f.Sync()
}
func (w bareWriter) close() error { return w.f.Close() }

// records makes n realistic intent records and their JSON.
func records(n int, tag string) ([]*model.Task, [][]byte) {
	recs := make([]*model.Task, n)
	vals := make([][]byte, n)
	now := time.Now()
	for i := range recs {
		args := json.RawMessage(fmt.Sprintf(`{"seconds":%d,"note":"benchmark record %d of %d"}`, i%600, i, n))
		recs[i] = model.NewIntent(model.ServerRef{Name: "demo"}, "sleep", args, fmt.Sprintf("%s-key-%d", tag, i), now)
		vals[i], _ = json.Marshal(recs[i])
	}
	return recs, vals
}

// runWrites writes n records with the given number of concurrent writers
// into a fresh directory and returns records per second.
func runWrites(sys writeSystem, root string, writers, n int, round int) (float64, int64, error) {
	dir, err := os.MkdirTemp(root, "write-*")
	if err != nil {
		return 0, 0, err
	}
	defer os.RemoveAll(dir)
	w, err := sys.open(dir)
	if err != nil {
		return 0, 0, err
	}
	recs, vals := records(n, fmt.Sprintf("r%d", round))
	var next atomic.Int64
	var errs atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	start := time.Now()
	for range writers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := w.write(recs[i], vals[i]); err != nil {
					errs.Add(1)
					once.Do(func() { firstErr = err })
				}
			}
		})
	}
	wg.Wait()
	el := time.Since(start)
	if err := w.close(); err != nil && firstErr == nil {
		firstErr = err
	}
	if firstErr != nil {
		return 0, errs.Load(), fmt.Errorf("%s: %d errors, first: %w", sys.name, errs.Load(), firstErr)
	}
	return float64(n) / el.Seconds(), 0, nil
}

// benchWrites is measurement 1.
func benchWrites(cfg config) (string, []finding) {
	var out string
	var found []finding
	for _, writers := range []int{1, 64} {
		n := cfg.writeOps1
		if writers > 1 {
			n = cfg.writeOps64
		}
		res := make([][]float64, len(writeSystems))
		for round := range cfg.rounds {
			// Rotate the order so that no design always runs first.
			for k := range writeSystems {
				i := (k + round) % len(writeSystems)
				ops, _, err := runWrites(writeSystems[i], cfg.tmp, writers, n, round)
				if err != nil {
					logf("write bench: %v", err)
					continue
				}
				res[i] = append(res[i], ops)
			}
		}
		t := &table{head: []string{"design", "writers", "records/s (median)", "min–max", "µs/record", "vs bare fsync", "vs taskdeck"}}
		bare, ours := median(res[0]), median(res[1])
		for i, sys := range writeSystems {
			m := median(res[i])
			lo, hi := minMax(res[i])
			t.add(sys.name, fmt.Sprint(writers), fmt.Sprintf("%.0f", m), fmt.Sprintf("%.0f–%.0f", lo, hi),
				fmt.Sprintf("%.0f", 1e6/m), ratio(m, bare), ratio(m, ours))
		}
		out += fmt.Sprintf("\n%d writer(s), %d records per run, %d runs, throughput ratios (higher is better):\n\n%s", writers, n, cfg.rounds, t)
		if writers == 1 {
			found = append(found, finding{"1.1 one writer: taskdeck time per record ≤ 1.3× bare fsync",
				bare/ours <= 1.3, fmt.Sprintf("%.2f× (%.0f vs %.0f µs)", bare/ours, 1e6/ours, 1e6/bare)})
		} else {
			sq := max(median(res[3]), median(res[4]))
			found = append(found, finding{"1.2 64 writers: taskdeck ≥ 5× the better SQLite mode",
				ours >= 5*sq, fmt.Sprintf("%.1f× (%.0f vs %.0f records/s)", ours/sq, ours, sq)})
		}
	}
	return out, found
}
