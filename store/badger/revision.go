package badger

import (
	"github.com/taskdeck/taskdeck/store"

	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/taskdeck/taskdeck/model"
)

// Revisions. Every record change a commit makes gets the next store-wide
// revision, assigned by the group's leader in commit order (a group's are
// contiguous). A txn that fails is run again with the same revisions, so a
// failed commit leaves no hole. The revision index (r\x00<rev>) holds each
// live record once, at its last change; a deletion leaves a tombstone
// (d\x00<rev>). The store's revision is the highest key of the two, so it
// costs no write of its own, and a crash cannot part it from the records
// it counts. Tombstones older than the last maxTombstones revisions are
// dropped; replay from below the newest one dropped (the floor, the one
// value of metaKey) could miss a deletion, so ChangesSince refuses it.

// maxTombstones bounds the deletions kept for replay: the last this many
// revisions' (so at most this many). A watcher that has been away for
// longer starts from a Snapshot. A variable so that tests reach it fast.
var maxTombstones uint64 = 10000

// revMeta is the revision state of a store.
type revMeta struct {
	rev    uint64 // the last committed revision
	floor  uint64 // ChangesSince(r) needs r >= floor
	counts statusCounts
	audit  []byte // the audit chain's head: the last entry's hash
}

// readMeta reads revMeta; found is false when the floor was never
// written. A store without it is new, or older than revisions: then its
// records carry revision 0 and none is in the revision index, so replay
// from 0 is refused (floor 1) when there is any record.
func readMeta(txn *badger.Txn) (m revMeta, found bool, err error) {
	for _, prefix := range [][]byte{revPrefix, tombPrefix} {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix, Reverse: true})
		it.Seek(revKey(prefix, 1<<64-1))
		if it.Valid() {
			k := it.Item().Key()
			if len(k) != len(prefix)+8 {
				it.Close()
				return m, false, &store.DecodeError{Err: fmt.Errorf("malformed revision key %q", k)}
			}
			m.rev = max(m.rev, binary.BigEndian.Uint64(k[len(prefix):]))
		}
		it.Close()
	}
	item, err := txn.Get(metaKey)
	if errors.Is(err, badger.ErrKeyNotFound) {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: recordPrefix})
		defer it.Close()
		it.Rewind()
		if it.Valid() {
			m.floor = 1
		}
		return m, false, nil
	}
	if err != nil {
		return m, false, err
	}
	err = item.Value(func(v []byte) error {
		if len(v) != 8 {
			return &store.DecodeError{Err: fmt.Errorf("the revision floor is %d bytes, not 8", len(v))}
		}
		m.floor = binary.BigEndian.Uint64(v)
		return nil
	})
	return m, true, err
}

// loadRevisions reads the revision state at open; found is false when
// the floor must be written (checkSchema does, in its commit).
func (s *Store) loadRevisions() (found, auditFound bool, err error) {
	err = s.view(func(txn *badger.Txn) (err error) {
		if s.meta, found, err = readMeta(txn); err != nil {
			return err
		}
		if s.meta.audit, auditFound, err = readAuditHead(txn); err != nil {
			return err
		}
		s.meta.counts, err = readCounts(txn, s.meta)
		return err
	})
	s.rev.Store(s.meta.rev)
	return found, auditFound, err
}

func floorValue(floor uint64) []byte { return binary.BigEndian.AppendUint64(nil, floor) }

// revisions hands out the revisions of one group txn and collects its
// changes. It is made afresh for every run of the txn.
type revisions struct {
	meta    revMeta // as it will be once the txn commits
	key     []byte  // the audit key (nil: entries unsealed)
	deleted bool    // the txn wrote a tombstone
	changes []store.Change
	// The audit entries appended and not yet written (audit.go): from
	// revision runFrom on, their stored forms and about their size.
	run       [][]byte
	runFrom   uint64
	runBytes  int
	entryKeys bool // Store.entryKeys
}

// put writes t (its value, base, marshalled with Revision 0: see
// encodeRecord) with its status index entry and its audit entry (entry,
// see auditEntry) as the next change; prev is the record it replaces (nil
// for a new one). t must be the caller's private copy: the hook receives
// it.
func (r *revisions) put(txn *badger.Txn, t *model.Task, base []byte, prev *model.Task, e entry) error {
	r.meta.rev++
	t.Revision = r.meta.rev
	prevStatus := model.Status("")
	if prev != nil {
		prevStatus = prev.Status
		if err := dropRevEntry(txn, prev); err != nil {
			return err
		}
	}
	if err := putRecord(txn, t, withRevision(base, t.Revision), prevStatus); err != nil {
		return err
	}
	if err := txn.Set(revKey(revPrefix, t.Revision), []byte(t.ID)); err != nil {
		return err
	}
	if err := r.audit(txn, e); err != nil {
		return err
	}
	r.meta.counts.move(prevStatus, t.Status)
	r.changes = append(r.changes, store.Change{Rev: t.Revision, ID: t.ID, Task: t, Prev: prevStatus})
	return nil
}

// remove deletes record t with its index keys as the next change, by
// act, and leaves its tombstone and its audit entry.
func (r *revisions) remove(txn *badger.Txn, t *model.Task, act *model.Act) error {
	if err := deleteRecord(txn, t); err != nil {
		return err
	}
	if err := dropRevEntry(txn, t); err != nil {
		return err
	}
	r.meta.rev++
	if err := txn.Set(revKey(tombPrefix, r.meta.rev), []byte(t.ID)); err != nil {
		return err
	}
	if err := r.audit(txn, sealEntry(r.key, model.RemovalAudit(t.ID, act, time.Now()))); err != nil {
		return err
	}
	r.deleted = true
	r.meta.counts.move(t.Status, "")
	r.changes = append(r.changes, store.Change{Rev: r.meta.rev, ID: t.ID, Prev: t.Status})
	return nil
}

// dropRevEntry deletes the revision index entry of a record as stored;
// one written before revisions has none.
func dropRevEntry(txn *badger.Txn, t *model.Task) error {
	if t.Revision == 0 {
		return nil
	}
	return txn.Delete(revKey(revPrefix, t.Revision))
}

// finish writes the txn's audit run, the counts per status as of the txn's last revision
// when it changed records (from is the revision before it), and drops, when the txn deleted a record, the tombstones older than
// the last maxTombstones revisions, and moves the floor up past them.
// Without deletions no tombstone is added, so there are never more.
func (r *revisions) finish(txn *badger.Txn, from uint64) error {
	if err := r.writeRun(txn); err != nil {
		return err
	}
	if r.meta.rev != from {
		if err := txn.Set(countsKey, r.meta.counts.value(r.meta.rev)); err != nil {
			return err
		}
	}
	if !r.deleted || r.meta.rev <= maxTombstones {
		return nil
	}
	cut := r.meta.rev - maxTombstones
	// Tombstones up to the floor are gone already: their deletion marks
	// would make a scan from the start slower with every prune chunk.
	it := txn.NewIterator(badger.IteratorOptions{Prefix: tombPrefix})
	var drop [][]byte
	for it.Seek(revKey(tombPrefix, r.meta.floor+1)); it.Valid(); it.Next() {
		k := it.Item().KeyCopy(nil)
		if binary.BigEndian.Uint64(k[len(tombPrefix):]) > cut {
			break
		}
		drop = append(drop, k)
	}
	it.Close()
	if len(drop) == 0 {
		return nil
	}
	for _, k := range drop {
		if err := txn.Delete(k); err != nil {
			return err
		}
	}
	r.meta.floor = binary.BigEndian.Uint64(drop[len(drop)-1][len(tombPrefix):])
	return txn.Set(metaKey, floorValue(r.meta.floor))
}

// withRevision returns base, a record's value marshalled with Revision 0
// (so without the field), with revision rev: what json.Marshal gives for
// it, since Revision is Task's last field (after argsApart, if base starts
// with it). The leader of a group thus
// marshals nothing.
func withRevision(base []byte, rev uint64) []byte {
	out := make([]byte, 0, len(base)+32)
	out = append(out, base[:len(base)-1]...)
	if len(base) > 2 {
		out = append(out, ',')
	}
	out = append(out, `"revision":`...)
	out = strconv.AppendUint(out, rev, 10)
	return append(out, '}')
}

// Revision is the last committed revision of the store (0 for a new
// store). It survives close/open.
func (s *Store) Revision() uint64 { return s.rev.Load() }

// SetCommitHook registers fn, called after every synced commit that
// changed records with that commit's changes, in revision order, never two
// calls at once, never before the sync, and before the writers of the
// commit return. A commit whose sync failed (its callers got the error,
// but reads see it) is published with the next one that syncs. fn must be
// quick; nil removes it.
func (s *Store) SetCommitHook(fn func([]store.Change)) {
	if fn == nil {
		s.hook.Store(nil)
		return
	}
	s.hook.Store(&fn)
}

// publish hands a synced group's changes, after any a failed sync held
// back, to the hook. Only the group's leader calls it.
func (s *Store) publish(changes []store.Change) {
	if len(s.unsynced) > 0 {
		changes = append(s.unsynced, changes...)
		s.unsynced = nil
	}
	if len(changes) == 0 {
		return
	}
	if fn := s.hook.Load(); fn != nil {
		(*fn)(changes)
	}
}

// Snapshot returns every record and the revision they are as of, read in
// one transaction: Snapshot and every hook call's changes with Rev > rev
// are the whole history, nothing twice.
func (s *Store) Snapshot() (rev uint64, tasks []*model.Task, err error) {
	err = s.view(func(txn *badger.Txn) error {
		m, _, err := readMeta(txn)
		if err != nil {
			return err
		}
		rev = m.rev
		tasks, err = allRecords(txn)
		return err
	})
	return rev, tasks, err
}

// ChangesSince returns, in revision order, the changes after rev up to the
// store's revision (each record once, at its latest revision; deletions
// as tombstones), read in one transaction, and the revision they bring a
// watcher to. ok is false when rev is below the floor (a deletion after
// it is no longer kept) or above the store's revision (another store's):
// the caller takes a Snapshot instead.
func (s *Store) ChangesSince(rev uint64) (changes []store.Change, upTo uint64, ok bool, err error) {
	err = s.view(func(txn *badger.Txn) error {
		m, _, err := readMeta(txn)
		if err != nil {
			return err
		}
		upTo = m.rev
		if rev < m.floor || rev > m.rev {
			return nil
		}
		ok = true
		entries, err := revEntries(txn, revPrefix, rev, true)
		if err != nil {
			return err
		}
		tombs, err := revEntries(txn, tombPrefix, rev, false)
		if err != nil {
			return err
		}
		entries = append(entries, tombs...)
		slices.SortFunc(entries, func(a, b revEntry) int { return cmp.Compare(a.rev, b.rev) })
		// A record deleted and created again has a tombstone before its
		// entry, and one deleted twice two tombstones: keep the last.
		last := make(map[string]uint64, len(entries))
		for _, e := range entries {
			last[e.id] = e.rev
		}
		for _, e := range entries {
			if last[e.id] != e.rev {
				continue
			}
			c := store.Change{Rev: e.rev, ID: e.id}
			if e.live {
				t, _, err := getRecord(txn, e.id)
				if err != nil {
					return fmt.Errorf("revision index: %w", err)
				}
				if t.Revision != e.rev {
					// Written by a taskdeck older than revisions, which
					// left this entry behind.
					continue
				}
				c.Task = t
			}
			changes = append(changes, c)
		}
		return nil
	})
	if err != nil {
		return nil, 0, false, s.damaged(err)
	}
	return changes, upTo, ok, nil
}

type revEntry struct {
	rev  uint64
	id   string
	live bool
}

// revEntries lists the entries under prefix (the revision index or the
// tombstones) after revision rev, reading from the first one on.
func revEntries(txn *badger.Txn, prefix []byte, rev uint64, live bool) ([]revEntry, error) {
	var out []revEntry
	it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
	defer it.Close()
	for it.Seek(revKey(prefix, rev+1)); it.Valid(); it.Next() {
		item := it.Item()
		k := item.Key()
		if len(k) != len(prefix)+8 {
			return nil, &store.DecodeError{Err: fmt.Errorf("malformed revision key %q", k)}
		}
		id, err := item.ValueCopy(nil)
		if err != nil {
			return nil, err
		}
		out = append(out, revEntry{binary.BigEndian.Uint64(k[len(prefix):]), string(id), live})
	}
	return out, nil
}
