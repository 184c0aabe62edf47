package badger

import (
	"errors"
	"sync"

	badger "github.com/dgraph-io/badger/v4"
)

// Group commit. Every transaction costs a sync (walsync.go), so N
// concurrent commits would cost N fsyncs. commit therefore joins the
// changes of concurrent callers into one Badger transaction: one caller at
// a time leads, runs every queued change in one txn, and one sync covers
// them all. Every caller returns only after its own change is synced.

// maxGroup bounds one group: 128 records of ~1 KiB with their index keys
// stay far below Badger's txn size limit (15% of the 8 MiB memtable).
const maxGroup = 128

type group struct {
	mu      sync.Mutex
	queue   []*commitReq
	leading bool
}

type commitReq struct {
	// key is the record the change writes. Two changes to one record never
	// share a txn: inside one, Update's version check could not see the
	// other's pending write. "" runs alone (prune chunks, the schema).
	key string
	// bigValue: the change writes a value that goes to the value log,
	// which the WAL sync does not cover.
	bigValue bool
	// fn makes the change; rv gives each record it writes its revision.
	fn func(txn *badger.Txn, rv *revisions) error
	// run, when set, is run instead of a txn, with no commit in flight
	// (key is ""): work that Badger needs done without writes (reclaim).
	run  func() error
	err  error
	wake chan bool // false: done, err is set; true: lead the next group
}

// errAbort stops a group's txn when one change fails; the others run again
// without it.
var errAbort = errors.New("a change in the group failed")

// commit runs fn in a synced write txn, possibly shared with concurrent
// callers' changes. fn must have no effect but its txn's, since it may run
// more than once. On ErrConflict another writer committed first, so fn runs
// again on newer data; that always makes progress, hence no retry limit.
func (s *Store) commit(key string, fn func(txn *badger.Txn, rv *revisions) error) error {
	return s.enqueue(&commitReq{key: key, fn: fn})
}

// commitRecord is commit for a change that writes val as a record and ev
// (nil: none) as its outbox event.
func (s *Store) commitRecord(id string, val, ev []byte, fn func(txn *badger.Txn, rv *revisions) error) error {
	// The revision the commit appends to val adds at most 32 bytes.
	return s.commitValues(id, fn, len(val)+32, len(ev))
}

// commitValues is commit for a change that writes values of the sizes
// given: one that goes to the value log, which the WAL sync does not
// cover, makes the commit sync it too.
func (s *Store) commitValues(key string, fn func(txn *badger.Txn, rv *revisions) error, sizes ...int) error {
	vlog := 0
	for _, n := range sizes {
		if n >= int(s.threshold) {
			vlog += n
		}
	}
	err := s.enqueue(&commitReq{key: key, bigValue: vlog > 0, fn: fn})
	if vlog > 0 && err == nil {
		s.noteValueLog(vlog)
	}
	return err
}

// alone runs fn when no commit is in flight, and holds later commits
// back until it returns.
func (s *Store) alone(fn func() error) error {
	return s.enqueue(&commitReq{run: fn})
}

func (s *Store) enqueue(r *commitReq) error {
	if err := s.hold(); err != nil {
		return err
	}
	defer s.release()
	r.wake = make(chan bool, 1)
	g := &s.group
	g.mu.Lock()
	g.queue = append(g.queue, r)
	lead := !g.leading
	g.leading = true
	g.mu.Unlock()
	if !lead && !<-r.wake {
		return r.err
	}
	// r is at the head of the queue, so take includes it.
	s.runGroup(g.take())
	g.mu.Lock()
	if len(g.queue) > 0 {
		g.queue[0].wake <- true // hand over: no caller leads for long
	} else {
		g.leading = false
	}
	g.mu.Unlock()
	return r.err
}

// take removes the next group from the queue: the head, and the changes
// after it up to the first that must run alone or repeats a record.
func (g *group) take() []*commitReq {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 1
	if g.queue[0].key != "" {
		seen := map[string]bool{g.queue[0].key: true}
		for n < len(g.queue) && n < maxGroup {
			k := g.queue[n].key
			if k == "" || seen[k] {
				break
			}
			seen[k] = true
			n++
		}
	}
	batch := make([]*commitReq, n)
	copy(batch, g.queue)
	g.queue = append(g.queue[:0], g.queue[n:]...)
	return batch
}

// runGroup commits the changes of a group in one txn and tells each caller
// its outcome. A change that fails is dropped and the rest run again.
func (s *Store) runGroup(batch []*commitReq) {
	if batch[0].run != nil { // take gives it a batch of its own
		batch[0].err = batch[0].run()
		batch[0].wake <- false
		return
	}
	var failed []*commitReq
	defer func() {
		for _, r := range failed {
			r.wake <- false
		}
	}()
	for len(batch) > 0 {
		bad, full := -1, 0
		var rv revisions
		err := s.db.Update(func(txn *badger.Txn) error {
			rv = revisions{meta: s.meta, key: s.auditKey, entryKeys: s.entryKeys}
			for i, r := range batch {
				err := r.fn(txn, &rv)
				if i > 0 && errors.Is(err, badger.ErrTxnTooBig) {
					full = i // the changes before it fill the txn
					return err
				}
				if err != nil {
					bad, r.err = i, err
					return errAbort
				}
			}
			return rv.finish(txn, s.meta.rev)
		})
		if err != nil && bad < 0 && !errors.Is(err, badger.ErrConflict) && s.wal != nil {
			s.wal.stale = true // Badger's write failed, maybe creating a WAL
		}
		switch {
		case err == nil:
			// Applied, and durable once synced. A failed sync is every
			// caller's error; running the changes again would apply
			// them twice. Reads see them either way, so the revisions
			// are taken and the changes published with the next sync.
			s.meta = rv.meta
			s.rev.Store(rv.meta.rev)
			// Before any caller hears of its commit, so that its next
			// Get reads what it wrote.
			s.recent.forget(rv.changes)
			err = s.sync(batch)
			if err == nil {
				s.writes.Add(int64(len(batch)))
				s.publish(rv.changes)
			} else {
				s.unsynced = append(s.unsynced, rv.changes...)
			}
			for _, r := range batch {
				r.err = err
				r.wake <- false
			}
			return
		case full > 0:
			s.runGroup(batch[:full])
			s.runGroup(batch[full:])
			return
		case bad >= 0:
			failed = append(failed, batch[bad])
			batch = append(batch[:bad:bad], batch[bad+1:]...)
		case errors.Is(err, badger.ErrConflict):
			// Run again on newer data.
		case len(batch) > 1:
			// Too big, or the disk failed: let each change find its own fate.
			for _, r := range batch {
				s.runGroup([]*commitReq{r})
			}
			return
		default:
			batch[0].err = err
			batch[0].wake <- false
			return
		}
	}
}

// sync makes a committed group durable: the WAL (and the directory entry
// of a new one), and db.Sync too when a change wrote to the value log or
// the WAL is unknown.
func (s *Store) sync(batch []*commitReq) error {
	full := s.wal == nil
	for _, r := range batch {
		full = full || r.bigValue
	}
	if s.wal != nil {
		switch err := s.wal.sync(); {
		case errors.Is(err, errWALUnknown):
		case err != nil || !full:
			return err
		}
	}
	if s.onDBSync != nil {
		s.onDBSync()
	}
	return s.db.Sync()
}
