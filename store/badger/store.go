// Package badger is the embedded store.Backend: taskdeck's task records in
// a Badger database, one synced transaction per change, a status index and
// an idempotency-key index written in the same transaction as the record.
// It is the only package that imports Badger; inside it, the name badger
// is dgraph's package.
package badger

import (
	"github.com/taskdeck/taskdeck/store"

	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v5"
	badger "github.com/dgraph-io/badger/v4"
	"github.com/taskdeck/taskdeck/termtext"
)

var _ store.Backend = (*Store)(nil)

// Store is an open task store. Its methods are safe for concurrent use.
type Store struct {
	db  *badger.DB
	dir string
	// auditKey seals the audit entries (SetAuditKey); nil: unsealed.
	auditKey []byte
	// entryKeys: every audit entry is written under a key of its own,
	// as before runs (schema 3): BenchmarkAuditedCreate's baseline, and
	// the old stores the tests read.
	entryKeys bool
	// writes counts committed writes (one per commit call, however they
	// were grouped), so tests can prove that a call which changed nothing
	// cost no write.
	writes atomic.Int64
	group  group
	// closing: reads and commits hold it for reading; Close takes it to
	// wait for those in flight, then sets closed so later ones are refused.
	closing sync.RWMutex
	closed  bool
	// wal syncs each commit; nil when the WAL cannot be found, and then
	// db.Sync does (walsync.go).
	wal *walSyncer
	// meta is the revision state as committed; only the group's leader
	// touches it after Open, and unsynced (changes a failed sync held
	// back). rev is meta.rev for readers.
	meta     revMeta
	unsynced []store.Change
	rev      atomic.Uint64
	hook     atomic.Pointer[func([]store.Change)]
	// vlogWritten counts the bytes written to the value log since the
	// last reclaim; reclaiming: one runs (reclaim.go), in background.
	vlogWritten atomic.Int64
	reclaiming  atomic.Bool
	reclaimMu   sync.Mutex
	// onCompact, when set (tests), hears each step of a reclaim's
	// compaction ("flatten", "vlog-gc") before it is taken.
	onCompact func(step string)
	// onDBSync, when set (tests), hears each db.Sync after a commit.
	onDBSync   func()
	threshold  int64 // Badger's ValueThreshold
	background sync.WaitGroup
	logger     *slog.Logger
	// events makes the outbox's event of a change (outbox.go); nil: none.
	events store.EventFunc
	// recent: the records Get read last (recent.go).
	recent recent
}

// lockSettles bounds Open's wait for a directory lock that no live
// process names. A child this process forks holds a copy of every
// descriptor until it execs, the store directory's flocked one
// included: while it does, the store looks in use by nobody, and the
// copy goes within moments. Another taskdeck checking the store before
// its Badger opens names nobody either, and names itself once it has
// opened.
const lockSettles = 2 * time.Second

// Open opens the store in dir, creating it (mode 0700) if needed. A nil
// logger silences Badger; otherwise its warnings and errors go to logger.
// Nothing is ever written to stdout or stderr.
func Open(dir string, logger *slog.Logger) (*Store, error) {
	if err := PrepareDir(dir); err != nil {
		return nil, err
	}
	wait := &backoff.ExponentialBackOff{InitialInterval: time.Millisecond, RandomizationFactor: 0.5, Multiplier: 2, MaxInterval: 100 * time.Millisecond}
	return backoff.Retry(context.Background(), func() (*Store, error) {
		s, err := open(dir, logger)
		var locked *store.LockedError
		if errors.As(err, &locked) && holderUnknown(locked.PID) {
			return nil, err // try again
		}
		if err != nil {
			return nil, backoff.Permanent(err)
		}
		return s, nil
	}, backoff.WithBackOff(wait), backoff.WithMaxElapsedTime(lockSettles))
}

// holderUnknown says that pid, read from the LOCK file of a locked store,
// names no process that holds it: none, or one that has died.
func holderUnknown(pid int) bool {
	return pid == 0 || processGone(pid)
}

// open is one attempt of Open's.
func open(dir string, logger *slog.Logger) (*Store, error) {
	unlock, held := lockDir(dir)
	defer unlock()
	if held {
		return nil, &store.LockedError{Dir: dir, PID: lockPID(dir)}
	}
	found, err := checkFiles(dir, options(dir, logger))
	if err != nil {
		return nil, err
	}
	if err := checkRoom(dir, found.walBytes); err != nil {
		return nil, err
	}
	// Each session's Close flushes its memtable into a new level-0 table,
	// and a short one closes before Badger's compactors get to them: after
	// ~1,000 commands the tables took every file descriptor. Once a few
	// have gathered, this session's Close compacts level 0.
	opt := options(dir, logger)
	if found.walFile/2 > opt.MemTableSize {
		// A WAL left by a bigger memtable (before issue 20's sizing)
		// replays into one memtable; the next session is small again.
		opt = opt.WithMemTableSize(found.walFile / 2)
	}
	opt = opt.WithCompactL0OnClose(found.level0 >= compactL0At && roomToCompact(dir, found, opt.MemTableSize))
	unlock()
	db, err := badger.Open(opt)
	// A process killed between Badger's creating its next memtable or
	// value-log file and sizing it leaves a 0-byte file, and every Open
	// creates one of each, so kills in a row leave several. Badger's Open
	// fails on one of them, sizing it as it fails (dgraph-io/badger#2207);
	// the next Open reads that one as empty.
	for tries := 0; err != nil && strings.Contains(err.Error(), emptyFileMarker) && tries < found.emptyFiles; tries++ {
		db, err = badger.Open(opt)
	}
	if err != nil {
		return nil, openError(dir, err)
	}
	s := &Store{db: db, dir: dir, logger: logger, threshold: opt.ValueThreshold}
	if w, ok := newWALSyncer(dir); ok {
		s.wal = w
	}
	floorFound, auditFound, err := s.loadRevisions()
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("cannot read store %s: %w", dir, err)
	}
	if err := s.checkSchema(floorFound); err != nil {
		_ = db.Close()
		return nil, err
	}
	if err := s.startAudit(auditFound); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("cannot start the audit log of store %s: %w", dir, err)
	}
	if err := s.compactIfPruned(); err != nil {
		_ = db.Close()
		return nil, openError(dir, err)
	}
	if err := restrictFiles(dir); err != nil {
		_ = db.Close()
		return nil, err
	}
	return s, nil
}

// Close flushes and closes the store.
func (s *Store) Close() error {
	s.background.Wait() // a reclaim in flight
	err := s.closeDB()
	// Close writes new table files, with Badger's umask-dependent modes.
	if perr := restrictFiles(s.dir); err == nil {
		err = perr
	}
	return err
}

// hold keeps Close waiting until release, or says the store is closed:
// Badger panics on a read that overlaps its Close, and a commit's WAL
// sync must not meet a closed file.
func (s *Store) hold() error {
	s.closing.RLock()
	if s.closed {
		s.closing.RUnlock()
		return fmt.Errorf("store %s is closed (taskdeck is quitting); nothing was read or written", s.dir)
	}
	return nil
}

func (s *Store) release() { s.closing.RUnlock() }

// view runs fn in a read txn, unless the store is closed. A record that
// does not decode, or a Badger panic on what it read, is damage.
func (s *Store) view(fn func(txn *badger.Txn) error) (err error) {
	if err := s.hold(); err != nil {
		return err
	}
	defer s.release()
	defer func() {
		if r := recover(); r != nil {
			err = &store.CorruptError{Dir: s.dir, Reason: termtext.OneLine(fmt.Sprintf("reading it failed (%v)", r), 0)}
		}
	}()
	return s.damaged(s.db.View(fn))
}

// damaged turns a decode error into a *CorruptError.
func (s *Store) damaged(err error) error {
	var de *store.DecodeError
	if errors.As(err, &de) {
		return &store.CorruptError{Dir: s.dir, Reason: termtext.OneLine(err.Error(), 0)}
	}
	return err
}

// Dir returns the directory the store was opened in.
func (s *Store) Dir() string { return s.dir }

// PrepareDir makes sure dir is a private directory of this user that we
// can write to, and turns each way it can fail into one line that says
// what to do. It runs before anything in dir is opened: whoever can write
// to the directory could plant the files taskdeck trusts.
func PrepareDir(dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("cannot create data directory %s (%w); choose another --data-dir", dir, cause(err))
		}
		// MkdirAll's mode is filtered by the umask; make it exact.
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("cannot make data directory %s private (%w); choose another --data-dir", dir, cause(err))
		}
	case err != nil:
		return fmt.Errorf("cannot use data directory %s (%w); choose another --data-dir", dir, cause(err))
	case !fi.IsDir():
		return fmt.Errorf("data directory %s is not a directory; move it aside or use --data-dir", dir)
	default:
		if uid, ok := ownerUID(fi); ok && uid != os.Geteuid() {
			return fmt.Errorf("data directory %s belongs to uid %d, not to you (uid %d); choose your own --data-dir", dir, uid, os.Geteuid())
		}
		if fi.Mode().Perm()&0o077 != 0 {
			// Drop group and other bits only: an owner who made the store
			// read-only meant it, and is told so below.
			if err := os.Chmod(dir, fi.Mode().Perm()&0o700); err != nil {
				return fmt.Errorf("cannot make data directory %s private (%w); fix its owner or use --data-dir", dir, cause(err))
			}
		}
	}
	// Badger's own error for this is a failed LOCK write; a probe file
	// names the real problem. It also catches read-only file systems.
	f, err := os.CreateTemp(dir, ".probe-*")
	if err != nil {
		return fmt.Errorf("store %s is not writable (%w); fix its permissions or use --data-dir", dir, cause(err))
	}
	_ = f.Close()
	return os.Remove(f.Name())
}

// cause strips the path from an *fs.PathError: messages already name dir.
func cause(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// restrictFiles makes every file in dir 0600. Badger creates its mapped
// files with 0666 filtered by the umask and has no option for the mode.
func restrictFiles(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("store %s: %w", dir, err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		fi, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue // Badger removed it meanwhile
		}
		if err != nil {
			return fmt.Errorf("store %s: %w", dir, err)
		}
		if fi.Mode().Perm()&^0o600 != 0 {
			if err := os.Chmod(filepath.Join(dir, e.Name()), 0o600); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("store %s: %w", dir, err)
			}
		}
	}
	return nil
}

// Badger flattens its errors into strings (y.Wrap without debug mode), so
// they can only be told apart by their text. These markers are from
// v4.9.6; the lock and corruption tests fail if an upgrade changes them.
const lockMarker = "Cannot acquire directory lock"

// emptyFileMarker is in the error Badger's Open fails with (ristretto's
// z.NewFile) on a 0-byte memtable or value-log file
// (TestOpenAfterKillDuringFileCreation).
const emptyFileMarker = "Create a new file"

var corruptMarkers = []string{
	"manifest has",            // bad magic, checksum mismatch, unsupported version
	"MANIFEST invalid",        // a table added twice
	"MANIFEST file has",       // an unknown change op
	"magic number",            // the external magic
	"checksum mismatch",       // tables, value log, key registry
	"Encryption key mismatch", // KEYREGISTRY damaged
	"Invalid datakey id",      // value log header names no known key
	"Log truncate required",
	"sanity text",                      // KEYREGISTRY cut short
	"Manifest file might be corrupted", // a change's length past the file's end
}

// environmentMarkers are failures of the machine, not of the files; the
// store must not be called damaged (and moved aside) because of them.
var environmentMarkers = []string{
	"permission denied", "no space left", "too many open files", "cannot allocate memory",
}

func openError(dir string, err error) error {
	msg := err.Error()
	if strings.Contains(msg, lockMarker) {
		return &store.LockedError{Dir: dir, PID: lockPID(dir)}
	}
	if containsAny(msg, corruptMarkers) && !containsAny(msg, environmentMarkers) {
		return &store.CorruptError{Dir: dir, Reason: termtext.OneLine(msg, 0)}
	}
	return fmt.Errorf("cannot open store %s: %s", dir, termtext.OneLine(msg, 0))
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// lockPID reads the pid Badger's lock holder wrote into dir/LOCK.
func lockPID(dir string) int {
	b, err := os.ReadFile(filepath.Join(dir, "LOCK"))
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0
	}
	return pid
}

// checkSchema writes the schema version into a new store and refuses a
// store written by a newer, incompatible taskdeck. Unless floorFound, it
// writes the revision floor too: before any record is written, since
// only then can records older than revisions be told from new ones.
func (s *Store) checkSchema(floorFound bool) error {
	var found string
	err := s.view(func(txn *badger.Txn) error {
		item, err := txn.Get(schemaKey)
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		v, err := item.ValueCopy(nil)
		found = string(v)
		return err
	})
	switch {
	case err != nil:
		return fmt.Errorf("cannot read store %s: %w", s.dir, err)
	case found == schemaVersion && floorFound:
		return nil
	case found == schemaVersion:
	case found == "1", found == "2", found == "3":
		// Version 1 kept open records under their record keys, version 2
		// every record's arguments inline, version 3 every audit entry
		// under a key of its own; reads follow each layout, and every
		// write uses the new one.
	case found != "":
		return fmt.Errorf("store %s has schema version %q, this taskdeck reads %q; use a newer taskdeck or another --data-dir", s.dir, found, schemaVersion)
	}
	return s.commit("", func(txn *badger.Txn, _ *revisions) error {
		if !floorFound {
			if err := txn.Set(metaKey, floorValue(s.meta.floor)); err != nil {
				return err
			}
		}
		return txn.Set(schemaKey, []byte(schemaVersion))
	})
}
