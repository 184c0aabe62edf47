package badger

import (
	"errors"
	"fmt"

	badger "github.com/dgraph-io/badger/v4"
)

// Space. A record rewritten on every poll leaves its old copies behind:
// in the LSM tree, compaction drops them as writes go on; in the value log
// only Badger's value-log GC does, and only for files that compactions
// have found garbage in (discard stats). Records below the value threshold
// (128 KiB, options.go) never reach the value log. For bigger ones, and after a
// prune, reclaim makes the garbage visible and gives it back without a
// restart: it flushes the memtables (the only public way is DropPrefix, of
// the compact marker), flattens the tree and runs value-log GC.

// reclaimAfter is how many bytes go to the value log between two
// reclaims, which bounds the value log to the live big records plus about
// this much (and its current file).
const reclaimAfter = 32 << 20

// gcDiscardRatio is the share of a value-log file that is garbage once it
// is rewritten.
const gcDiscardRatio = 0.5

// noteValueLog counts n bytes written to the value log and starts a
// reclaim in the background when reclaimAfter is reached.
func (s *Store) noteValueLog(n int) {
	if s.vlogWritten.Add(int64(n)) < reclaimAfter || !s.reclaiming.CompareAndSwap(false, true) {
		return
	}
	s.background.Go(func() {
		defer s.reclaiming.Store(false)
		_ = s.reclaim() // a failed mark: the next reclaimAfter bytes try again
	})
}

// reclaim gives back the space of old record copies and deleted records:
// it marks the store for compaction (so that a crash before the flush
// leaves the next Open to finish), flushes alone in the commit queue (DropPrefix
// refuses writes while it flushes), then flattens and runs value-log GC
// while commits go on, and syncs. On a nearly full disk it only marks:
// writing the new tables could fault (guard.go). Only a failed mark is an
// error: space not given back now is at the next Open, and compaction
// catches up meanwhile.
func (s *Store) reclaim() error {
	s.reclaimMu.Lock() // Prune's and the background's: one flatten at a time
	defer s.reclaimMu.Unlock()
	s.vlogWritten.Store(0)
	if err := s.commit("", func(txn *badger.Txn, _ *revisions) error { return txn.Set(compactKey, []byte{1}) }); err != nil {
		return err
	}
	flushed := false
	err := s.alone(func() error {
		if free, ok := freeBytes(s.dir); ok && free < s.reclaimRoom() {
			return nil
		}
		if s.wal != nil {
			s.wal.stale = true // the flush starts a new memtable WAL
		}
		if err := s.db.DropPrefix(compactKey); err != nil {
			return fmt.Errorf("flushing: %w", err)
		}
		flushed = true
		return nil
	})
	if err == nil && flushed {
		err = s.compact()
	}
	if err != nil && s.logger != nil {
		s.logger.Warn("the store's space is given back at its next open", "dir", s.dir, "err", err)
	}
	return nil
}

// compact flattens the tree, which drops old versions and tombstones and
// counts the value-log space they held, then rewrites each value-log file
// that is at least gcDiscardRatio garbage.
func (s *Store) compact() error {
	if err := s.hold(); err != nil {
		return err
	}
	defer s.release()
	s.step("flatten")
	if err := s.db.Flatten(2); err != nil {
		return fmt.Errorf("compacting: %w", err)
	}
	for {
		s.step("vlog-gc")
		err := s.db.RunValueLogGC(gcDiscardRatio)
		if errors.Is(err, badger.ErrNoRewrite) || errors.Is(err, badger.ErrRejected) {
			break
		}
		if err != nil {
			return fmt.Errorf("value-log GC: %w", err)
		}
	}
	// GC moved live values into new WAL and value-log entries, which no
	// commit's sync covers.
	if err := s.db.Sync(); err != nil {
		return err
	}
	return restrictFiles(s.dir)
}

// reclaimRoom is what a reclaim may write: the memtables flushed, and the
// whole tree rewritten by the flatten.
func (s *Store) reclaimRoom() uint64 {
	need := 2 * s.db.Opts().MemTableSize
	for _, l := range s.db.Levels() {
		need += l.Size
	}
	return uint64(need)
}

func (s *Store) step(name string) {
	if s.onCompact != nil {
		s.onCompact(name)
	}
}
