// Package postgres keeps taskdeck's task records in a PostgreSQL database
// that a fleet of engines shares. It is a store.Backend: every write is
// committed with synchronous_commit on before it returns (a create or an
// update in one statement, the writes of a process that wait meanwhile in
// the same commit); the idempotency key is unique in the database;
// revisions come from a one-row counter that every write transaction
// increments, so they are gapless and commit-ordered across hosts. The
// commit hook hears this process's commits and every other's: a write
// sends NOTIFY, and a catch-up query by revision (the truth) publishes what
// others committed, on every notification and after every reconnect of the
// listener.
package postgres

import (
	"cmp"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store"
	"github.com/taskdeck/taskdeck/termtext"
)

//go:embed migrations/*.sql
var migrations embed.FS

// channel is the NOTIFY channel; a notification's payload is the revision
// its commit reached.
const channel = "taskdeck_changes"

// opTimeout bounds one call, so that a lost database fails a call with an
// error rather than hanging it.
const opTimeout = 30 * time.Second

// pruneChunk bounds the records one prune txn deletes.
const pruneChunk = 500

// maxTombstones bounds the deletions kept for replay, as in the Badger
// store. A variable so that tests reach it fast.
var maxTombstones uint64 = 10000

var errClosed = errors.New("the PostgreSQL store is closed (taskdeck is quitting); nothing was read or written")

// errStale tells Update that the record changed between its read and its
// write.
var errStale = errors.New("record changed meanwhile")

// Store is an open PostgreSQL task store. Its methods are safe for
// concurrent use.
type Store struct {
	pool *pgxpool.Pool
	// auditKey seals the audit entries (SetAuditKey); nil: unsealed.
	auditKey []byte
	log      *slog.Logger
	closed   atomic.Bool
	// rev is the highest revision this process knows committed.
	rev  atomic.Uint64
	hook atomic.Pointer[func([]store.Change)]
	// pubMu orders hook calls; published is the revision the hook has
	// heard up to.
	pubMu     sync.Mutex
	published uint64

	// backends are the server pids of the pool's connections: their
	// commits' notifications need no catch-up, since the writer has the
	// hook hear its own commit (see committed).
	backends sync.Map

	// qmu guards the writes queued for the next commit, and whether one
	// of their writers leads it; writing counts the puts under way.
	qmu     sync.Mutex
	queue   []*putReq
	leading bool
	writing sync.WaitGroup

	stopListen context.CancelFunc
	listenDone chan struct{}
	healthHook atomic.Pointer[func(error)] // see SetHealthHook
	// engine names the changes no frontend made: this host's engine.
	engine model.Actor
	// events makes the outbox's event of a change (outbox.go); nil: none.
	events store.EventFunc
}

var _ store.Backend = (*Store)(nil)

// The fleet's database is the engine's shared store (store.OpenShared).
func init() {
	store.RegisterShared(func(ctx context.Context, conn string, logger *slog.Logger) (store.Shared, error) {
		s, err := Open(ctx, conn, logger)
		if err != nil {
			return nil, err // not a nil *Store in a non-nil Shared
		}
		return s, nil
	})
}

var _ store.Shared = (*Store)(nil)

// Open connects to the database named by connString (a postgres:// URL or
// key=value string), brings its schema up to date (under an advisory lock,
// so engines may Open at once), and starts listening for other processes'
// commits. A nil logger discards the listener's warnings.
func Open(ctx context.Context, connString string, logger *slog.Logger) (*Store, error) {
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	cfg, err := pgxpool.ParseConfig(connString)
	if err != nil {
		return nil, fmt.Errorf("the PostgreSQL connection string is not valid (%s); fix --store or the config", oneLine(err))
	}
	// A startup parameter outranks the server's, the database's and the
	// role's defaults: every commit waits for its WAL flush.
	cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "on"
	host, _ := os.Hostname()
	s := &Store{log: logger, listenDone: make(chan struct{}), engine: model.EngineActor(host)}
	cfg.AfterConnect = func(_ context.Context, c *pgx.Conn) error {
		s.backends.Store(c.PgConn().PID(), true)
		return nil
	}
	cfg.BeforeClose = func(c *pgx.Conn) { s.backends.Delete(c.PgConn().PID()) }
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("cannot open the PostgreSQL store: %s", oneLine(err))
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, &openLost{err}
	}
	// The cause stays reachable: a connection lost or a write refused on
	// the way is the database's reach, not damage (see Lost, RefusesWrites).
	if err := migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, &dbErr{what: "prepare its tables", err: err}
	}
	s.pool = pool
	var rev int64
	if err := pool.QueryRow(ctx, `SELECT rev FROM taskdeck_meta`).Scan(&rev); err != nil {
		pool.Close()
		return nil, &dbErr{what: "read its revision", err: err}
	}
	s.rev.Store(uint64(rev))
	s.published = uint64(rev)
	lctx, cancel := context.WithCancel(context.Background())
	s.stopListen = cancel
	go s.listen(lctx, cfg.ConnConfig)
	return s, nil
}

// migrate applies the embedded migrations not yet applied, holding goose's
// session advisory lock.
func migrate(ctx context.Context, pool *pgxpool.Pool) error {
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	// Retry the lock every second for up to five minutes.
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockTimeout(1, 300))
	if err != nil {
		return err
	}
	files, err := fs.Sub(migrations, "migrations")
	if err != nil {
		return err
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, files,
		goose.WithSessionLocker(locker), goose.WithTableName("taskdeck_migrations"))
	if err != nil {
		return err
	}
	_, err = p.Up(ctx)
	return err
}

// Close lets the writes under way finish, stops listening and closes the
// pool; later calls fail.
func (s *Store) Close() error {
	s.qmu.Lock()
	already := s.closed.Swap(true)
	s.qmu.Unlock()
	if already {
		return nil
	}
	s.writing.Wait()
	s.stopListen()
	<-s.listenDone
	s.pool.Close()
	return nil
}

func (s *Store) ctx() (context.Context, context.CancelFunc, error) {
	if s.closed.Load() {
		return nil, nil, errClosed
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	return ctx, cancel, nil
}

// inTx runs fn in a txn of its own and commits it. A pooled connection
// that the server closed meanwhile (a restart) fails its first use, at
// BEGIN, which changed nothing: then the pool has dropped it, and the txn
// starts again on another, up to one try per pooled connection.
func (s *Store) inTx(ctx context.Context, opts pgx.TxOptions, fn func(pgx.Tx) error) error {
	for try := int32(0); ; try++ {
		tx, err := s.pool.BeginTx(ctx, opts)
		if err != nil {
			if deadConn(err) && try < s.pool.Config().MaxConns {
				continue
			}
			return err
		}
		if err := fn(tx); err != nil {
			_ = tx.Rollback(ctx)
			return err
		}
		return tx.Commit(ctx)
	}
}

// deadConn says err came from a connection the server had closed before
// anything was done on it.
func deadConn(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03"
	}
	return pgconn.SafeToRetry(err)
}

// dbError puts a database error on one line that names the store.
func dbError(what string, err error) error {
	if errors.Is(err, store.ErrNotFound) || errors.Is(err, errStale) {
		return err
	}
	var dup *store.DuplicateKeyError
	if errors.As(err, &dup) {
		return err
	}
	return &dbErr{what: what, err: err}
}

// dbErr is a database error on one line (pgx's connection errors list
// every address tried on a line of its own); the cause stays reachable.
type dbErr struct {
	what string
	err  error
}

func (e *dbErr) Error() string { return "PostgreSQL store: " + e.what + ": " + oneLine(e.err) }
func (e *dbErr) Unwrap() error { return e.err }

// oneLine is err's text on one line.
func oneLine(err error) string { return termtext.OneLine(err.Error(), 0) }

// Revision is the highest revision this process knows committed: its own
// commits' and those the listener caught up with.
func (s *Store) Revision() uint64 { return s.rev.Load() }

func (s *Store) noteRev(rev uint64) {
	for {
		cur := s.rev.Load()
		if rev <= cur || s.rev.CompareAndSwap(cur, rev) {
			return
		}
	}
}

// Write statements. Each write txn first increments the counter (taking its
// row lock, held to commit): revisions are handed out in commit order, and a
// txn that rolls back leaves no hole. Creates and updates do all of it in
// one statement that also notifies on channel: a lone write createSQL or
// updateSQL, a batch taskdeck_put (migrations/00003_put.sql).
const (
	// createSQL and updateSQL write one record, at the revision they
	// take; a write refused is an error (a unique violation, or TD001 for
	// an update whose record moved on or whose claim no longer holds),
	// which rolls the revision back. Plain SQL with scalar arguments, each
	// planned once per connection. The update's checks see the record as
	// it is once the counter is held (READ COMMITTED rechecks a row that
	// changed meanwhile).
	// Each also appends the change's audit entry ($7 made at $8 for a
	// create, $9 at $10 for an update), chained after the head its counter
	// row holds (migrations/00007_audit.sql). Their Event forms also add
	// the change's outbox rows (ev, store/outbox.go) from three more
	// parameters: the event's id, its endpoints (comma-separated) and body.
	createSQL      = createHead + notifyRev
	createEventSQL = createHead + `,
	ev AS (INSERT INTO taskdeck_outbox (rev, endpoint, event_id, at, body)
		SELECT m.rev, ep, $9::text, $8, $11::bytea FROM m, unnest(string_to_array($10::text, ',')) AS ep)` + notifyRev
	updateSQL      = updateHead + notifyUpdated
	updateEventSQL = updateHead + `,
	ev AS (INSERT INTO taskdeck_outbox (rev, endpoint, event_id, at, body)
		SELECT m.rev, ep, $11::text, $10, $13::bytea FROM m, unnest(string_to_array($12::text, ',')) AS ep)` + notifyUpdated
	putSQL = `SELECT o_rev, coalesce(o_code, ''), coalesce(o_constraint, '') FROM taskdeck_put($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`
	// auditSQL appends the entry $2 (made at $3, of task $4) at revision $1,
	// the next after the head: for the writes of s.write and a prune.
	auditSQL = `WITH m AS (
		UPDATE taskdeck_meta SET audit = sha256(audit || int8send($1::bigint) || $2::bytea) RETURNING audit)
	INSERT INTO taskdeck_audit (rev, at, task, body, hash) SELECT $1, $3, $4, $2, audit FROM m`
	bumpSQL   = `UPDATE taskdeck_meta SET rev = rev + 1 RETURNING rev`
	notifySQL = `SELECT pg_notify('` + channel + `', rev::text) FROM taskdeck_meta`
	// dropTombsSQL drops the tombstones older than the last $1 revisions
	// and moves the floor up to the newest one dropped.
	dropTombsSQL = `WITH gone AS (
		DELETE FROM taskdeck_tombstones WHERE rev <= (SELECT rev FROM taskdeck_meta) - $1 RETURNING rev)
		UPDATE taskdeck_meta SET floor = (SELECT max(rev) FROM gone) WHERE EXISTS (SELECT 1 FROM gone)`
)

// The codes a refused write is answered with: the record is no
// longer at the revision the update read (or the claim no longer holds),
// or a unique constraint (the id's or the key's) refused it.
const (
	staleCode  = "TD001"
	uniqueCode = "23505"
)

// maxBatch bounds the writes one taskdeck_put commits.
const maxBatch = 256

// errDupID and errDupKey refuse a create whose id or idempotency key a
// committed record has.
var (
	errDupID  = errors.New("the task id is taken")
	errDupKey = errors.New("the idempotency key is taken")
)

// putReq is one write: rec (its JSON val) new when prev is nil, else the
// record at revision *prev, fenced by claim c. done gets its answer;
// lead, the turn of its writer to commit the writes queued.
type putReq struct {
	rec     *model.Task
	val     []byte
	audit   []byte // the change's audit entry, made at auditAt
	auditAt time.Time
	event   *store.Event // the change's outbox event, if any
	prev    *int64
	c       *Claim
	done    chan error
	lead    chan struct{}
}

// put writes rec, committed before it returns: a new record when prev is
// 0, else the record still at revision prev, from (and, with a claim, still
// held by it; else errStale). rec must be the caller's own copy: the hook
// may receive it. The writes queued while a commit is under way go in the
// next one together, committed by one of their writers (the lead), so
// that a write alone needs no other goroutine.
func (s *Store) put(what string, rec *model.Task, from *model.Task, prev uint64, c *Claim) error {
	val, err := body(rec)
	if err != nil {
		return err
	}
	now := time.Now()
	req := &putReq{rec: rec, val: val, c: c, done: make(chan error, 1), lead: make(chan struct{}, 1),
		audit: model.SealAudit(s.auditKey, model.NewAuditBody(from, rec, val, rec.Act, now).Marshal()), auditAt: now}
	if s.events != nil {
		req.event = s.events(from, rec)
	}
	if prev != 0 {
		p := int64(prev)
		req.prev = &p
	}
	s.qmu.Lock()
	if s.closed.Load() {
		s.qmu.Unlock()
		return errClosed
	}
	s.writing.Add(1)
	defer s.writing.Done()
	s.queue = append(s.queue, req)
	lead := !s.leading
	s.leading = true
	s.qmu.Unlock()
	if !lead {
		select {
		case err = <-req.done:
		case <-req.lead:
			lead = true
		}
	}
	if lead {
		s.lead()
		err = <-req.done // it was the first queued
	}
	if err != nil && !errors.Is(err, errStale) && !errors.Is(err, errDupID) && !errors.Is(err, errDupKey) {
		return dbError(what, err)
	}
	return err
}

// lead commits the writes queued, up to maxBatch, then hands the lead to
// the first write queued meanwhile, if any.
func (s *Store) lead() {
	s.qmu.Lock()
	batch := slices.Clone(s.queue[:min(len(s.queue), maxBatch)])
	s.queue = slices.Delete(s.queue, 0, len(batch))
	s.qmu.Unlock()
	s.commit(batch)
	s.qmu.Lock()
	defer s.qmu.Unlock()
	if len(s.queue) == 0 {
		s.leading = false
		return
	}
	s.queue[0].lead <- struct{}{}
}

// commit writes batch in one statement and answers each write; the hook
// hears the commits in revision order before their writers return.
func (s *Store) commit(batch []*putReq) {
	n := len(batch)
	if n == 1 {
		s.commitOne(batch[0])
		return
	}
	ids, keys, statuses, servers := make([]string, n), make([]*string, n), make([]string, n), make([]string, n)
	at, vals, prevs, fences, owners := make([]time.Time, n), make([][]byte, n), make([]*int64, n), make([]*int64, n), make([]*string, n)
	audits, auditAts := make([][]byte, n), make([]time.Time, n)
	evIDs, evEndpoints, evBodies := make([]*string, n), make([]*string, n), make([][]byte, n)
	for i, r := range batch {
		ids[i], keys[i], statuses[i], servers[i] = r.rec.ID, nullKey(r.rec.IdempotencyKey), string(r.rec.Status), r.rec.Server.String()
		at[i], vals[i], prevs[i], fences[i], owners[i] = r.rec.UpdatedAt, r.val, r.prev, fenceOf(r.c), ownerOf(r.c)
		audits[i], auditAts[i] = r.audit, r.auditAt
		evIDs[i], evEndpoints[i], evBodies[i] = eventArgs(r.event)
	}
	type result struct {
		rev        *int64
		code, cons string
	}
	var res []result
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	err := s.reread(func() error {
		rows, err := s.pool.Query(ctx, putSQL, ids, keys, statuses, at, vals, servers, prevs, fences, owners, audits, auditAts, evIDs, evEndpoints, evBodies)
		if err != nil {
			return err
		}
		res, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (result, error) {
			var r result
			return r, row.Scan(&r.rev, &r.code, &r.cons)
		})
		return err
	})
	if err == nil && len(res) != n {
		err = fmt.Errorf("taskdeck_put answered %d of %d writes", len(res), n)
	}
	var pe *pgconn.PgError
	if err != nil && errors.As(err, &pe) {
		// The server refused the batch for one write's sake (a value it
		// cannot take): alone, each write gets its own answer.
		for _, r := range batch {
			s.commit([]*putReq{r})
		}
		return
	}
	for i, r := range batch {
		switch {
		case err != nil:
			r.done <- err
		case res[i].rev != nil:
			s.answer(r, *res[i].rev)
		default:
			r.done <- refusal(r, res[i].code, res[i].cons)
		}
	}
}

// The writes' parts (createSQL, updateSQL). A write with no event runs a
// statement with no outbox part: with one that is skipped by a parameter,
// PostgreSQL plans every execution anew (TestLoneWritesArePlannedOnce).
const (
	createHead = `WITH m AS (
		UPDATE taskdeck_meta SET rev = rev + 1, audit = sha256(audit || int8send(rev + 1) || $7::bytea) RETURNING rev, audit),
	ins AS (
		INSERT INTO taskdeck_tasks (id, idem_key, status, revision, updated_at, body, server)
		SELECT $1, $2, $3, rev, $4, $5, $6 FROM m),
	aud AS (
		INSERT INTO taskdeck_audit (rev, at, task, body, hash) SELECT rev, $8, $1, $7, audit FROM m)`
	notifyRev = `
	SELECT rev, pg_notify('` + channel + `', rev::text) FROM m`
	updateHead = `WITH m AS (
		UPDATE taskdeck_meta SET rev = rev + 1, audit = sha256(audit || int8send(rev + 1) || $9::bytea) RETURNING rev, audit),
	upd AS (
		UPDATE taskdeck_tasks t SET idem_key = $2, status = $3, updated_at = $4, body = $5, revision = m.rev FROM m
		WHERE t.id = $1 AND t.revision = $6 AND taskdeck_holds(t.fence, t.owner, t.lease_until, $7, $8)
		RETURNING 1),
	aud AS (
		INSERT INTO taskdeck_audit (rev, at, task, body, hash) SELECT rev, $10, $1, $9, audit FROM m)`
	notifyUpdated = `
	SELECT CASE WHEN EXISTS (SELECT FROM upd) THEN rev ELSE taskdeck_stale() END, pg_notify('` + channel + `', rev::text) FROM m`
)

// commitOne writes r alone, in createSQL or updateSQL (their Event
// forms when the change makes an event).
func (s *Store) commitOne(r *putReq) {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	sql, args := createSQL, []any{r.rec.ID, nullKey(r.rec.IdempotencyKey), string(r.rec.Status), r.rec.UpdatedAt, r.val, r.rec.Server.String(), r.audit, r.auditAt}
	if r.prev != nil {
		sql, args = updateSQL, []any{r.rec.ID, nullKey(r.rec.IdempotencyKey), string(r.rec.Status), r.rec.UpdatedAt, r.val, *r.prev, fenceOf(r.c), ownerOf(r.c), r.audit, r.auditAt}
	}
	if r.event != nil && len(r.event.Endpoints) > 0 {
		evID, evEndpoints, evBody := eventArgs(r.event)
		args = append(args, evID, evEndpoints, evBody)
		sql = map[string]string{createSQL: createEventSQL, updateSQL: updateEventSQL}[sql]
	}
	var rev int64
	err := s.reread(func() error { return s.pool.QueryRow(ctx, sql, args...).Scan(&rev, nil) })
	var pe *pgconn.PgError
	switch {
	case err == nil:
		s.answer(r, rev)
	case errors.As(err, &pe) && (pe.Code == staleCode || pe.Code == uniqueCode):
		r.done <- refusal(r, pe.Code, pe.ConstraintName)
	default:
		r.done <- err
	}
}

// answer tells r's writer its record committed at rev, once the hook has.
func (s *Store) answer(r *putReq, rev int64) {
	r.rec.Revision = uint64(rev)
	s.committed(r.rec.Revision, &store.Change{Rev: r.rec.Revision, ID: r.rec.ID, Task: r.rec})
	r.done <- nil
}

// refusal is the error of a write refused with code (and constraint).
func refusal(r *putReq, code, constraint string) error {
	switch {
	case code == staleCode:
		return errStale
	case constraint == "taskdeck_tasks_pkey":
		return errDupID
	case constraint == "taskdeck_tasks_idem_key":
		return errDupKey
	}
	return fmt.Errorf("task %s: refused by constraint %s", r.rec.ID, constraint)
}

// write runs fn in one txn; fn queues its statements on b and returns
// the check to run on their results. Nothing is kept unless it commits.
// After the commit, write waits for the hook to hear it.
func (s *Store) write(what string, fn func(b *pgx.Batch) func() error) (uint64, error) {
	ctx, cancel, err := s.ctx()
	if err != nil {
		return 0, err
	}
	defer cancel()
	var rev int64
	err = s.inTx(ctx, pgx.TxOptions{}, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		b.Queue(bumpSQL).QueryRow(func(row pgx.Row) error { return row.Scan(&rev) })
		check := fn(b)
		b.Queue(notifySQL)
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return err
		}
		return check()
	})
	if err != nil {
		return 0, dbError(what, err)
	}
	s.committed(uint64(rev), nil)
	return uint64(rev), nil
}

// committed notes this process's commit of rev and has the hook hear it:
// own, the change the commit made (nil: look it up), goes to the hook as
// it is when the hook has heard every revision before it; otherwise a
// catch-up reads it with whatever other processes committed in between.
func (s *Store) committed(rev uint64, own *store.Change) {
	s.noteRev(rev)
	if err := s.catchUp(rev, own); err != nil {
		s.log.Warn("PostgreSQL store: the change feed could not read a commit back; it will with the next", "err", err)
	}
}

// nullKey stores an empty idempotency key as NULL, which the unique
// constraint does not compare.
func nullKey(k string) *string {
	if k == "" {
		return nil
	}
	return &k
}

// body is t's JSON without its revision (the revision column holds it).
func body(t *model.Task) ([]byte, error) {
	c := *t
	c.Revision = 0
	b, err := json.Marshal(&c)
	if err != nil {
		return nil, fmt.Errorf("task %s: %w", t.ID, err)
	}
	return b, nil
}

// Create writes a new record in one committed txn. When rec.IdempotencyKey
// already names a record it writes nothing and returns a
// *store.DuplicateKeyError holding that record.
func (s *Store) Create(rec *model.Task) (err error) {
	defer s.answered(&err)
	if err := store.CheckRecord(rec); err != nil {
		return err
	}
	rec.Attribute(nil, s.engine)
	own := rec.Clone()
	err = s.put("create task "+rec.ID, own, nil, 0, nil)
	switch {
	case errors.Is(err, errDupID):
		return fmt.Errorf("task %s already exists", rec.ID)
	case errors.Is(err, errDupKey):
		// Writers are serialized by the counter, so the record that holds
		// the key is committed and visible now.
		existing, gerr := s.ByKey(rec.IdempotencyKey)
		if gerr != nil {
			return dbError("read the record of a duplicate key", gerr)
		}
		return &store.DuplicateKeyError{Key: rec.IdempotencyKey, Existing: existing}
	case err != nil:
		return err
	}
	rec.Revision = own.Revision
	return nil
}

// Update calls fn on a copy of record id. If fn reports no change or an
// error, nothing is written. Otherwise the copy is written in one
// committed txn, unless the record changed in between: then fn runs again
// on the new record. Update returns the record as it now stands.
func (s *Store) Update(id string, fn func(t *model.Task) (changed bool, err error)) (rec *model.Task, err error) {
	defer s.answered(&err)
	return s.update(id, fn, false, nil)
}

// ReleaseKey takes record id's idempotency key off it, in one committed
// txn, if release says so of the record as stored (see badger.Store).
func (s *Store) ReleaseKey(id string, release func(t *model.Task) bool) (rec *model.Task, err error) {
	defer s.answered(&err)
	return s.update(id, func(t *model.Task) (bool, error) {
		if t.IdempotencyKey == "" || !release(t) {
			return false, nil
		}
		t.IdempotencyKey = ""
		return true, nil
	}, true, nil)
}

// update is Update; with dropKey, fn may also clear the idempotency key;
// with a claim, the write is refused with store.ErrFenced unless the claim
// still holds.
func (s *Store) update(id string, fn func(t *model.Task) (changed bool, err error), dropKey bool, c *Claim) (*model.Task, error) {
	for {
		cur, err := s.Get(id)
		if err != nil {
			return nil, err
		}
		next, _, err := store.ApplyUpdate(cur, fn, dropKey, s.engine)
		if err != nil {
			return nil, err
		}
		if next == nil {
			return cur, nil
		}
		// The hook gets a copy of its own: next goes back to the caller.
		own := next.Clone()
		err = s.put("update task "+id, own, cur, cur.Revision, c)
		if errors.Is(err, errStale) {
			if c != nil {
				if err := s.checkClaim(id, c); err != nil {
					return nil, err
				}
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		next.Revision = own.Revision
		return next, nil
	}
}

// Delete removes record id, leaving its tombstone and its audit entry (a
// forget by by), in one committed txn.
func (s *Store) Delete(id string, by model.Actor) (err error) {
	defer s.answered(&err)
	now := time.Now()
	entry := model.SealAudit(s.auditKey, model.RemovalAudit(id, &model.Act{Kind: model.ActForget, Actor: by}, now).Marshal())
	_, err = s.write("delete task "+id, func(b *pgx.Batch) func() error {
		var n int64
		b.Queue(`DELETE FROM taskdeck_tasks WHERE id = $1`, id).
			Exec(func(ct pgconn.CommandTag) error { n = ct.RowsAffected(); return nil })
		b.Queue(`INSERT INTO taskdeck_tombstones (rev, id) SELECT rev, $1 FROM taskdeck_meta`, id)
		b.Queue(`WITH m AS (
			UPDATE taskdeck_meta SET audit = sha256(audit || int8send(rev) || $1::bytea) RETURNING rev, audit)
			INSERT INTO taskdeck_audit (rev, at, task, body, hash) SELECT rev, $2, $3, $1, audit FROM m`, entry, now, id)
		b.Queue(dropTombsSQL, int64(maxTombstones))
		return func() error {
			if n == 0 {
				return fmt.Errorf("task %s: %w", id, store.ErrNotFound)
			}
			return nil
		}
	})
	return err
}

// Prune deletes terminal records last updated before cutoff (every
// terminal record when cutoff is zero) and returns how many it deleted,
// pruneChunk records per txn.
func (s *Store) Prune(cutoff time.Time, by model.Actor) (pruned int, err error) {
	defer s.answered(&err)
	var before *time.Time
	if !cutoff.IsZero() {
		before = &cutoff
	}
	var terminal []string
	for _, st := range model.AllStatuses {
		if st.Terminal() {
			terminal = append(terminal, string(st))
		}
	}
	const due = `status = ANY($1) AND ($2::timestamptz IS NULL OR updated_at < $2)`
	ids, err := s.ids(`SELECT id FROM taskdeck_tasks WHERE `+due+` ORDER BY id`, terminal, before)
	if err != nil {
		return 0, err
	}
	total := 0
	for chunk := range slices.Chunk(ids, pruneChunk) {
		n, err := s.pruneChunk(chunk, terminal, before, due, by)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// pruneChunk deletes the records of ids still due, one revision each.
func (s *Store) pruneChunk(ids, terminal []string, before *time.Time, due string, by model.Actor) (int, error) {
	ctx, cancel, err := s.ctx()
	if err != nil {
		return 0, err
	}
	defer cancel()
	var gone []string
	var rev int64
	err = s.inTx(ctx, pgx.TxOptions{}, func(tx pgx.Tx) error {
		gone = gone[:0]
		if err := tx.QueryRow(ctx, `SELECT rev FROM taskdeck_meta FOR UPDATE`).Scan(&rev); err != nil {
			return err
		}
		// Re-checked: another writer may have changed or deleted some.
		rows, err := tx.Query(ctx, `DELETE FROM taskdeck_tasks WHERE id = ANY($3) AND `+due+` RETURNING id`, terminal, before, ids)
		if err != nil {
			return err
		}
		gone, err = pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil || len(gone) == 0 {
			return err
		}
		slices.Sort(gone)
		b := &pgx.Batch{}
		b.Queue(`INSERT INTO taskdeck_tombstones (rev, id)
			SELECT $1 + u.ord, u.id FROM unnest($2::text[]) WITH ORDINALITY AS u(id, ord)`, rev, gone)
		now, act := time.Now(), &model.Act{Kind: model.ActPrune, Actor: by}
		for _, id := range gone {
			rev++
			b.Queue(auditSQL, rev, model.SealAudit(s.auditKey, model.RemovalAudit(id, act, now).Marshal()), now, id)
		}
		b.Queue(`UPDATE taskdeck_meta SET rev = $1`, rev)
		b.Queue(dropTombsSQL, int64(maxTombstones))
		b.Queue(notifySQL)
		return tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return 0, dbError("prune", err)
	}
	if len(gone) > 0 {
		s.committed(uint64(rev), nil)
	}
	return len(gone), nil
}

func (s *Store) ids(sql string, args ...any) ([]string, error) {
	ctx, cancel, err := s.ctx()
	if err != nil {
		return nil, err
	}
	defer cancel()
	var out []string
	err = s.reread(func() error {
		rows, err := s.pool.Query(ctx, sql, args...)
		if err == nil {
			out, err = pgx.CollectRows(rows, pgx.RowTo[string])
		}
		return err
	})
	if err != nil {
		return nil, dbError("read", err)
	}
	return out, nil
}

// querier is a pool or a txn.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// records reads the records a query selects as (id, revision, body).
func records(ctx context.Context, q querier, sql string, args ...any) ([]*model.Task, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, dbError("read", err)
	}
	defer rows.Close()
	var out []*model.Task
	for rows.Next() {
		var id string
		var rev int64
		var val []byte
		if err := rows.Scan(&id, &rev, &val); err != nil {
			return nil, dbError("read", err)
		}
		t := &model.Task{}
		if err := json.Unmarshal(val, t); err != nil {
			return nil, fmt.Errorf("PostgreSQL store: task %s: record does not decode (%v); delete its row or restore the database", id, err)
		}
		t.Revision = uint64(rev)
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, dbError("read", err)
	}
	return out, nil
}

const cols = `SELECT id, revision, body FROM taskdeck_tasks `

// byID is Get's lookup: the primary key's index, one row (the proxy's
// lookup of an agent's task id, TestGetIsAnIndexLookup).
const byID = `WHERE id = $1`

func (s *Store) read(sql string, args ...any) (out []*model.Task, err error) {
	err = s.reading(func(ctx context.Context) (err error) {
		out, err = records(ctx, s.pool, cols+sql, args...)
		return err
	})
	return out, err
}

// reading runs fn, a read, under the store's request deadline, and again
// when it met a connection the server had closed (reread).
func (s *Store) reading(fn func(ctx context.Context) error) error {
	ctx, cancel, err := s.ctx()
	if err != nil {
		return err
	}
	defer cancel()
	return s.reread(func() error { return fn(ctx) })
}

// reread runs fn again when it met a connection the server had closed
// (see inTx). fn is a read, which changes nothing, or one statement (a
// commit's write), whose implicit txn an error answer rolled back.
func (s *Store) reread(fn func() error) error {
	for try := int32(0); ; try++ {
		err := fn()
		if err == nil || !deadConn(err) || try >= s.pool.Config().MaxConns {
			return err
		}
	}
}

// Get returns record id, or an error wrapping store.ErrNotFound.
func (s *Store) Get(id string) (rec *model.Task, err error) {
	defer s.answered(&err)
	ts, err := s.read(byID, id)
	if err != nil {
		return nil, err
	}
	if len(ts) == 0 {
		return nil, fmt.Errorf("task %s: %w", id, store.ErrNotFound)
	}
	return ts[0], nil
}

// ByKey returns the record named by an idempotency key, or an error
// wrapping store.ErrNotFound.
func (s *Store) ByKey(key string) (rec *model.Task, err error) {
	defer s.answered(&err)
	ts, err := s.read(`WHERE idem_key = $1`, key)
	if err != nil {
		return nil, err
	}
	if len(ts) == 0 {
		return nil, fmt.Errorf("idempotency key %q: %w", key, store.ErrNotFound)
	}
	return ts[0], nil
}

// ByStatus returns the records with any of the given statuses, sorted by
// ID.
func (s *Store) ByStatus(st ...model.Status) (recs []*model.Task, err error) {
	defer s.answered(&err)
	return s.read(`WHERE status = ANY($1) ORDER BY id`, statusNames(st))
}

// Handles returns the handles of the records with any of the given
// statuses, sorted by ID, each body decoded only as far as its handle.
func (s *Store) Handles(st ...model.Status) (out []model.Handle, err error) {
	defer s.answered(&err)
	err = s.reading(func(ctx context.Context) error {
		rows, err := s.pool.Query(ctx, `SELECT id, body FROM taskdeck_tasks WHERE status = ANY($1) ORDER BY id`, statusNames(st))
		if err != nil {
			return dbError("read", err)
		}
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (h model.Handle, err error) {
			var id string
			var val []byte
			if err := row.Scan(&id, &val); err != nil {
				return h, dbError("read", err)
			}
			if err := json.Unmarshal(val, &h); err != nil {
				return h, fmt.Errorf("PostgreSQL store: task %s: record does not decode (%v); delete its row or restore the database", id, err)
			}
			return h, nil
		})
		return err
	})
	return out, err
}

// OpenTasks returns every record that is not terminal.
func (s *Store) OpenTasks() ([]*model.Task, error) { return s.ByStatus(open()...) }

// All returns every record, sorted by ID (IDs sort by creation time).
func (s *Store) All() (recs []*model.Task, err error) {
	defer s.answered(&err)
	return s.read(`ORDER BY id`)
}

// MatchIDs returns up to limit ids of records that start or end with
// part, from the primary key's index alone when the planner can (an
// index-only scan): no body is read.
func (s *Store) MatchIDs(part string, limit int) (ids []string, err error) {
	defer s.answered(&err)
	err = s.reading(func(ctx context.Context) error {
		rows, err := s.pool.Query(ctx, `SELECT id FROM taskdeck_tasks
			WHERE starts_with(id, $1) OR right(id, length($1)) = $1 ORDER BY id LIMIT $2`, part, limit)
		if err != nil {
			return err
		}
		ids, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	return ids, err
}

// Newest returns up to limit records, newest first.
func (s *Store) Newest(limit int) (recs []*model.Task, err error) {
	defer s.answered(&err)
	if limit <= 0 {
		return nil, nil
	}
	return s.read(`ORDER BY id DESC LIMIT $1`, limit)
}

// Counts returns how many records have each status (statuses with none
// are absent).
func (s *Store) Counts() (counts map[model.Status]int, err error) {
	defer s.answered(&err)
	_, counts, err = s.CountsAt()
	return counts, err
}

// CountsAt returns the counts per status and the revision they are as
// of, read in one snapshot.
func (s *Store) CountsAt() (rev uint64, counts map[model.Status]int, err error) {
	err = s.readTx("count", func(ctx context.Context, tx pgx.Tx) error {
		var r int64
		if err := tx.QueryRow(ctx, `SELECT rev FROM taskdeck_meta`).Scan(&r); err != nil {
			return err
		}
		rev = uint64(r)
		counts, err = countStatuses(ctx, tx)
		return err
	})
	if err == nil {
		s.noteRev(rev)
	}
	return rev, counts, err
}

// countStatuses counts the records per status, from the status index.
func countStatuses(ctx context.Context, q querier) (map[model.Status]int, error) {
	counts := map[model.Status]int{}
	rows, err := q.Query(ctx, `SELECT status, count(*) FROM taskdeck_tasks GROUP BY status`)
	if err != nil {
		return nil, err
	}
	var st string
	var n int
	_, err = pgx.ForEachRow(rows, []any{&st, &n}, func() error {
		counts[model.Status(st)] = n
		return nil
	})
	return counts, err
}

// Window returns, read in one snapshot: the store's revision, every open
// record (sorted by id), the newest finished records up to finished
// (newest first), and the number of records per status.
func (s *Store) Window(finished int) (w store.Window, err error) {
	err = s.readTx("read a window", func(ctx context.Context, tx pgx.Tx) error {
		var r int64
		if err := tx.QueryRow(ctx, `SELECT rev FROM taskdeck_meta`).Scan(&r); err != nil {
			return err
		}
		w.Rev = uint64(r)
		if w.Counts, err = countStatuses(ctx, tx); err != nil {
			return err
		}
		if w.Open, err = records(ctx, tx, cols+`WHERE status = ANY($1) ORDER BY id`, statusNames(open())); err != nil {
			return err
		}
		w.Finished, err = page(ctx, tx, "", finished, terminal())
		return err
	})
	if err == nil {
		s.noteRev(w.Rev)
	}
	return w, err
}

// Page returns up to limit records older than before (from the newest
// when before is ""), newest first; with statuses, only records in one of
// them. Each status is one range of the (status, id) index.
func (s *Store) Page(before string, limit int, statuses ...model.Status) ([]*model.Task, error) {
	ctx, cancel, err := s.ctx()
	if err != nil {
		return nil, err
	}
	defer cancel()
	var out []*model.Task
	err = s.reread(func() (err error) {
		out, err = page(ctx, s.pool, before, limit, statuses)
		return err
	})
	return out, err
}

func page(ctx context.Context, q querier, before string, limit int, statuses []model.Status) ([]*model.Task, error) {
	if limit <= 0 {
		return nil, nil
	}
	if len(statuses) == 0 {
		return records(ctx, q, cols+`WHERE ($1 = '' OR id < $1) ORDER BY id DESC LIMIT $2`, before, limit)
	}
	// One index range per status, merged: a plain status = ANY(...)
	// would read every match to sort them.
	var parts []string
	args := []any{before, limit}
	for _, st := range statuses {
		args = append(args, string(st))
		parts = append(parts, fmt.Sprintf(`(%sWHERE status = $%d AND ($1 = '' OR id < $1) ORDER BY id DESC LIMIT $2)`, cols, len(args)))
	}
	return records(ctx, q, `SELECT * FROM (`+strings.Join(parts, ` UNION ALL `)+`) p ORDER BY id DESC LIMIT $2`, args...)
}

func statusNames(st []model.Status) []string {
	names := make([]string, len(st))
	for i, x := range st {
		names[i] = string(x)
	}
	return names
}

func open() []model.Status {
	return slices.DeleteFunc(slices.Clone(model.AllStatuses), model.Status.Terminal)
}

func terminal() []model.Status {
	return slices.DeleteFunc(slices.Clone(model.AllStatuses), func(st model.Status) bool { return !st.Terminal() })
}

// readTx runs fn in one read-only repeatable-read txn: one snapshot.
func (s *Store) readTx(what string, fn func(ctx context.Context, tx pgx.Tx) error) error {
	ctx, cancel, err := s.ctx()
	if err != nil {
		return err
	}
	defer cancel()
	err = s.inTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly},
		func(tx pgx.Tx) error { return fn(ctx, tx) })
	if err != nil {
		return dbError(what, err)
	}
	return nil
}

// Snapshot returns every record and the revision they are as of, read in
// one snapshot.
func (s *Store) Snapshot() (rev uint64, tasks []*model.Task, err error) {
	defer s.answered(&err)
	err = s.readTx("snapshot", func(ctx context.Context, tx pgx.Tx) error {
		var r int64
		if err := tx.QueryRow(ctx, `SELECT rev FROM taskdeck_meta`).Scan(&r); err != nil {
			return err
		}
		rev = uint64(r)
		tasks, err = records(ctx, tx, cols+`ORDER BY id`)
		return err
	})
	if err == nil {
		s.noteRev(rev)
	}
	return rev, tasks, err
}

// ChangesSince returns, in revision order, the changes after rev up to the
// store's revision (each record once, at its latest revision; deletions as
// tombstones), read in one snapshot, and the revision they bring a watcher
// to. ok is false when rev is below the floor or above the store's
// revision: the caller takes a Snapshot instead.
func (s *Store) ChangesSince(rev uint64) (changes []store.Change, upTo uint64, ok bool, err error) {
	defer s.answered(&err)
	changes, upTo, floor, err := s.changesSince(rev)
	if err != nil || rev < floor || rev > upTo {
		return nil, upTo, false, err
	}
	return changes, upTo, true, nil
}

// changesSince reads the changes after rev, the store's revision and its
// floor in one snapshot.
func (s *Store) changesSince(rev uint64) (changes []store.Change, upTo, floor uint64, err error) {
	err = s.readTx("read changes", func(ctx context.Context, tx pgx.Tx) error {
		var r, f int64
		if err := tx.QueryRow(ctx, `SELECT rev, floor FROM taskdeck_meta`).Scan(&r, &f); err != nil {
			return err
		}
		upTo, floor = uint64(r), uint64(f)
		if rev >= upTo {
			return nil
		}
		live, err := records(ctx, tx, cols+`WHERE revision > $1`, int64(rev))
		if err != nil {
			return err
		}
		for _, t := range live {
			changes = append(changes, store.Change{Rev: t.Revision, ID: t.ID, Task: t})
		}
		rows, err := tx.Query(ctx, `SELECT rev, id FROM taskdeck_tombstones WHERE rev > $1`, int64(rev))
		if err != nil {
			return err
		}
		var tombs []store.Change
		for rows.Next() {
			var c store.Change
			var cr int64
			if err := rows.Scan(&cr, &c.ID); err != nil {
				rows.Close()
				return err
			}
			c.Rev = uint64(cr)
			tombs = append(tombs, c)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		changes = latest(append(changes, tombs...))
		return nil
	})
	return changes, upTo, floor, err
}

// latest sorts changes by revision and keeps each record's last: a record
// deleted and created again has a tombstone before its row.
func latest(changes []store.Change) []store.Change {
	slices.SortFunc(changes, func(a, b store.Change) int { return cmp.Compare(a.Rev, b.Rev) })
	last := make(map[string]uint64, len(changes))
	for _, c := range changes {
		last[c.ID] = c.Rev
	}
	return slices.DeleteFunc(changes, func(c store.Change) bool { return last[c.ID] != c.Rev })
}

// SetCommitHook registers fn, called with the changes committed after it
// was set, by this process and by every other on the database, in revision
// order, never two calls at once. This process's writers return after fn
// heard their commit. Changes come from a catch-up query by revision, so a
// record written twice between two calls is heard once, at its latest. fn
// must be quick; nil removes it.
func (s *Store) SetCommitHook(fn func([]store.Change)) {
	s.pubMu.Lock()
	defer s.pubMu.Unlock()
	if fn == nil {
		s.hook.Store(nil)
		return
	}
	s.published = max(s.published, s.rev.Load())
	s.hook.Store(&fn)
}

// catchUp publishes to the hook what was committed after the last
// published revision, unless that reaches rev already (rev 0: always
// look). own, if not nil, is the change committed at rev by this process:
// right after the published revision it needs no query.
func (s *Store) catchUp(rev uint64, own *store.Change) error {
	s.pubMu.Lock()
	defer s.pubMu.Unlock()
	if rev != 0 && s.published >= rev {
		return nil
	}
	fn := s.hook.Load()
	if fn == nil {
		// No one to tell: a notification still says how far the store is.
		s.published = max(s.published, rev)
		s.noteRev(rev)
		return nil
	}
	if own != nil && s.published+1 == rev {
		s.published = rev
		(*fn)([]store.Change{*own})
		return nil
	}
	changes, upTo, floor, err := s.changesSince(s.published)
	if err != nil {
		return err
	}
	if s.published < floor {
		// Away for longer than the tombstones are kept: deletions before
		// the floor cannot be heard.
		s.log.Warn("PostgreSQL store: the change feed fell behind the kept deletions; some deletions are not reported",
			"from", s.published, "floor", floor)
	}
	s.noteRev(upTo)
	if upTo <= s.published {
		return nil
	}
	s.published = upTo
	if len(changes) > 0 {
		(*fn)(changes)
	}
	return nil
}

// listen waits for other processes' commits on a connection of its own,
// catching up on each notification and after every (re)connect, until
// ctx ends.
func (s *Store) listen(ctx context.Context, cfg *pgx.ConnConfig) {
	defer close(s.listenDone)
	backoff := 50 * time.Millisecond
	for {
		err := s.listenOnce(ctx, cfg, func() { backoff = 50 * time.Millisecond })
		if ctx.Err() != nil {
			return
		}
		s.log.Warn("PostgreSQL store: listening for changes failed; reconnecting", "err", err, "in", backoff)
		s.health(err)
		// The server may have restarted and may give other hosts' new
		// backends the pids of this pool's dead connections: forget them
		// all before listening again (connections made from now on are
		// noted again; one not noted is only caught up with, at no loss).
		s.backends.Clear()
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

func (s *Store) listenOnce(ctx context.Context, cfg *pgx.ConnConfig, connected func()) error {
	conn, err := pgx.ConnectConfig(ctx, cfg.Copy())
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN "+channel); err != nil {
		return err
	}
	connected()
	s.health(nil)
	// Whatever was committed while no one listened.
	if err := s.catchUp(0, nil); err != nil {
		return err
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		if _, mine := s.backends.Load(n.PID); mine {
			// Its writer has the hook hear it; a commit whose answer was
			// lost is caught up with the next commit the hook hears.
			continue
		}
		rev, _ := strconv.ParseUint(n.Payload, 10, 64)
		if err := s.catchUp(rev, nil); err != nil {
			return err
		}
	}
}
