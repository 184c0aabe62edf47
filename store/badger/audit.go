package badger

import (
	"github.com/taskdeck/taskdeck/store"

	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/taskdeck/taskdeck/model"
)

// The audit log. Every change a commit makes (rv.put, rv.remove) appends
// its entry under a\x00<rev> in the same txn: the 32-byte hash, then the
// entry's canonical bytes (model.AuditBody). The chain's head, the last
// entry's hash, is in revMeta, so the group's leader chains each entry as
// it hands out its revision. A pruned log starts after the checkpoint
// (p\x00: the revision and hash of the last entry pruned).
var (
	auditPrefix   = []byte("a\x00")
	checkpointKey = []byte("p\x00")
)

// auditChunk bounds the entries one audit prune txn deletes: well within
// Badger's 1,638 entries a txn at a 1 MiB memtable (see pruneChunk).
const auditChunk = 1000

// engineActor names the Badger store's own changes: its only engine is
// this process's, on this host.
var engineActor = model.EngineActor("")

// auditEntry is the canonical bytes of the audit entry of a write of t
// (as base) over prev, made before the commit: the group's leader, which
// runs every change of a group one after the other, then only chains it.
func (s *Store) auditEntry(prev, t *model.Task, base []byte) []byte {
	return model.SealAudit(s.auditKey, model.NewAuditBody(prev, t, base, t.Act, time.Now()).Marshal())
}

// SetAuditKey makes every audit entry written after it sealed with key
// (model.SealAudit). It must be called before the store is shared.
func (s *Store) SetAuditKey(key []byte) { s.auditKey = key }

// audit appends the entry b of the change at r.meta.rev.
func (r *revisions) audit(txn *badger.Txn, b []byte) error {
	h := model.ChainHash(r.meta.audit, r.meta.rev, b)
	r.meta.audit = h
	return txn.Set(revKey(auditPrefix, r.meta.rev), append(h, b...))
}

// readAuditHead reads the chain's head: the last entry's hash, else the
// checkpoint's. found is false when the store has neither.
func readAuditHead(txn *badger.Txn) (head []byte, found bool, err error) {
	it := txn.NewIterator(badger.IteratorOptions{Prefix: auditPrefix, Reverse: true})
	defer it.Close()
	it.Seek(revKey(auditPrefix, 1<<64-1))
	if it.Valid() {
		v, err := it.Item().ValueCopy(nil)
		if err != nil {
			return nil, false, err
		}
		if len(v) < 32 {
			return nil, false, &store.DecodeError{Err: fmt.Errorf("audit entry %q is cut short", it.Item().Key())}
		}
		return v[:32], true, nil
	}
	cp, found, err := readCheckpoint(txn)
	if err != nil || !found {
		return nil, found, err
	}
	head, err = hex.DecodeString(cp.Hash)
	return head, true, err
}

// LastAudit reads the audit log's last entry (AuditTail).
func (s *Store) LastAudit() (rev uint64, body []byte, found bool, err error) {
	err = s.view(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: auditPrefix, Reverse: true})
		defer it.Close()
		it.Seek(revKey(auditPrefix, 1<<64-1))
		if !it.Valid() {
			return nil
		}
		k := it.Item().Key()
		v, err := it.Item().ValueCopy(nil)
		if err != nil {
			return err
		}
		if len(k) != len(auditPrefix)+8 || len(v) < 32 {
			return &store.DecodeError{Err: fmt.Errorf("audit entry %q is cut short", k)}
		}
		rev, body, found = binary.BigEndian.Uint64(k[len(auditPrefix):]), v[32:], true
		return nil
	})
	return rev, body, found, s.damaged(err)
}

func readCheckpoint(txn *badger.Txn) (cp model.AuditCheckpoint, found bool, err error) {
	item, err := txn.Get(checkpointKey)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return cp, false, nil
	}
	if err != nil {
		return cp, false, err
	}
	err = item.Value(func(v []byte) error {
		if len(v) < 8 {
			return &store.DecodeError{Err: fmt.Errorf("the audit checkpoint is %d bytes", len(v))}
		}
		cp.Rev, cp.Hash = binary.BigEndian.Uint64(v), hex.EncodeToString(v[8:])
		return nil
	})
	return cp, true, err
}

func checkpointValue(rev uint64, hash []byte) []byte {
	return append(binary.BigEndian.AppendUint64(nil, rev), hash...)
}

// startAudit begins the log of a store that has none: one written before
// the log existed starts it after its last revision, whose records have
// no entries.
func (s *Store) startAudit(found bool) error {
	if found || s.meta.rev == 0 {
		return nil
	}
	return s.commit("", func(txn *badger.Txn, rv *revisions) error {
		return txn.Set(checkpointKey, checkpointValue(rv.meta.rev, nil))
	})
}

// AuditLog calls fn with each audit entry kept, in revision order, read
// in one transaction, and returns the checkpoint the kept log starts
// after.
func (s *Store) AuditLog(fn store.AuditFunc) (model.AuditCheckpoint, error) {
	var cp model.AuditCheckpoint
	err := s.view(func(txn *badger.Txn) error {
		var err error
		if cp, _, err = readCheckpoint(txn); err != nil {
			return err
		}
		it := txn.NewIterator(badger.IteratorOptions{Prefix: auditPrefix})
		defer it.Close()
		for it.Seek(revKey(auditPrefix, cp.Rev+1)); it.Valid(); it.Next() {
			k := it.Item().Key()
			if len(k) != len(auditPrefix)+8 {
				return &store.DecodeError{Err: fmt.Errorf("malformed audit key %q", k)}
			}
			rev := binary.BigEndian.Uint64(k[len(auditPrefix):])
			err := it.Item().Value(func(v []byte) error {
				if len(v) < 32 {
					return fmt.Errorf("audit entry %d is cut short", rev)
				}
				return fn(cp, rev, v[32:], v[:32])
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	return cp, s.damaged(err)
}

// PruneAudit deletes the audit entries made before cutoff, oldest first
// up to the first made later, auditChunk per txn, and moves the
// checkpoint to the last one deleted, so that the rest still verifies.
// Records' entries go too: a record last changed before the checkpoint is
// no longer checked against its entry.
func (s *Store) PruneAudit(cutoff time.Time) (int, error) {
	total := 0
	for {
		n := 0
		err := s.commit("", func(txn *badger.Txn, _ *revisions) error {
			n = 0
			cp, _, err := readCheckpoint(txn)
			if err != nil {
				return err
			}
			var last []byte
			var lastRev uint64
			var drop [][]byte
			it := txn.NewIterator(badger.IteratorOptions{Prefix: auditPrefix})
			for it.Seek(revKey(auditPrefix, cp.Rev+1)); it.Valid() && len(drop) < auditChunk; it.Next() {
				v, err := it.Item().ValueCopy(nil)
				if err != nil {
					it.Close()
					return err
				}
				at, err := auditTime(v)
				if err != nil {
					it.Close()
					return err
				}
				if !at.Before(cutoff) {
					break
				}
				k := it.Item().KeyCopy(nil)
				drop, last, lastRev = append(drop, k), v[:32], binary.BigEndian.Uint64(k[len(auditPrefix):])
			}
			it.Close()
			for _, k := range drop {
				if err := txn.Delete(k); err != nil {
					return err
				}
			}
			n = len(drop)
			if n == 0 {
				return nil
			}
			return txn.Set(checkpointKey, checkpointValue(lastRev, last))
		})
		if err != nil {
			return total, err
		}
		total += n
		if n < auditChunk {
			break
		}
	}
	if total > 0 {
		// As after Prune: the space is given back now, or at the next open.
		return total, s.reclaim()
	}
	return total, nil
}

// auditTime reads the time of a stored entry (hash, then body).
func auditTime(v []byte) (time.Time, error) {
	e, err := store.DecodeAudit(0, v[min(32, len(v)):], v[:min(32, len(v))])
	return e.At, err
}
