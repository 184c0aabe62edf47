package badger

import (
	"github.com/taskdeck/taskdeck/store"

	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/taskdeck/taskdeck/model"
)

// pruneChunk bounds one prune txn, which Badger limits to 15% of the
// memtable and as many entries as 96-byte skiplist nodes fit there (1,638
// at 1 MiB, options.go). Each record costs three to five deletes (its
// key, index entry, idempotency key, arguments kept apart), its revision
// entry, tombstone and audit entry (about 250 bytes), and the oldest
// tombstone it drops: at most 9 entries and 450 bytes, so 100 records take
// at most 55% of either bound.
const pruneChunk = 100

// errStale tells Update that the record changed between its read and its
// write, so fn must see the newer record.
var errStale = errors.New("record changed meanwhile")

// Create writes a new record and its index keys in one synced txn. When
// rec.IdempotencyKey already names a record it writes nothing and returns
// a *DuplicateKeyError holding that record.
func (s *Store) Create(rec *model.Task) error {
	if err := store.CheckRecord(rec); err != nil {
		return err
	}
	rec.Attribute(nil, engineActor)
	// The store's copy: its revision is set in the commit, and the commit
	// hook receives it.
	stored := rec.Clone()
	stored.Revision = 0
	val, err := json.Marshal(stored)
	if err != nil {
		return fmt.Errorf("task %s: %w", rec.ID, err)
	}
	base, args, err := encodeRecord(stored, val, nil, false)
	if err != nil {
		return fmt.Errorf("task %s: %w", rec.ID, err)
	}
	entry := s.auditEntry(nil, stored, val)
	ev, evVal, err := s.eventFor(nil, stored)
	if err != nil {
		return fmt.Errorf("task %s: %w", rec.ID, err)
	}
	err = s.commitRecord(rec.ID, longer(base, args), evVal, func(txn *badger.Txn, rv *revisions) error {
		switch _, err := txn.Get(recordKey(rec.ID)); {
		case err == nil:
			return fmt.Errorf("task %s already exists", rec.ID)
		case !errors.Is(err, badger.ErrKeyNotFound):
			return err
		}
		if rec.IdempotencyKey != "" {
			// This read is conflict-tracked: of two racing Creates with
			// one key, the second to commit gets ErrConflict, retries,
			// and lands here.
			existing, err := byKey(txn, rec.IdempotencyKey)
			switch {
			case err == nil:
				return &store.DuplicateKeyError{Key: rec.IdempotencyKey, Existing: existing}
			case !errors.Is(err, store.ErrNotFound):
				return err
			}
			if err := txn.Set(idemKey(rec.IdempotencyKey), []byte(rec.ID)); err != nil {
				return err
			}
		}
		if err := rv.put(txn, stored, base, nil, entry); err != nil {
			return err
		}
		if err := putArgs(txn, rec.ID, base, args, false); err != nil {
			return err
		}
		return rv.outbox(txn, ev, evVal)
	})
	if err == nil {
		rec.Revision = stored.Revision
	}
	return err
}

// Update calls fn on a copy of record id. If fn reports no change or an
// error, nothing is written (no write txn is even started: most polls
// change nothing). Otherwise the copy is written with its status index in
// one synced txn. If the record changed in between, fn runs again on the
// new record. Update returns the record as it now stands.
func (s *Store) Update(id string, fn func(t *model.Task) (changed bool, err error)) (*model.Task, error) {
	return s.update(id, fn, false)
}

// ReleaseKey takes record id's idempotency key off it, so that the key
// may name another record, if release says so of the record as stored.
// The record, written again without the key, and the key's index entry
// go in one synced txn: the record is never missing and the key never
// names it halfway. A record without a key, or one release refuses, is
// not written. ReleaseKey returns the record as it now stands.
func (s *Store) ReleaseKey(id string, release func(t *model.Task) bool) (*model.Task, error) {
	return s.update(id, func(t *model.Task) (bool, error) {
		if t.IdempotencyKey == "" || !release(t) {
			return false, nil
		}
		t.IdempotencyKey = ""
		return true, nil
	}, true)
}

// update is Update; with dropKey, fn may also clear the idempotency key,
// whose index entry goes in the same txn.
func (s *Store) update(id string, fn func(t *model.Task) (changed bool, err error), dropKey bool) (*model.Task, error) {
	for {
		var cur *model.Task
		var version uint64
		var apart bool
		err := s.view(func(txn *badger.Txn) error {
			var err error
			if cur, version, err = getRecord(txn, id); err != nil {
				return err
			}
			// Only arguments this big are kept apart. The version check
			// below covers their key: it changes only with the record.
			if len(cur.Arguments) >= argsApartMin {
				apart, err = hasArgs(txn, id)
			}
			return err
		})
		if err != nil {
			return nil, err
		}
		next, keyDropped, err := store.ApplyUpdate(cur, fn, dropKey, engineActor)
		if err != nil {
			return nil, err
		}
		if next == nil {
			return cur, nil
		}
		stored := next.Clone() // the commit hook's
		stored.Revision = 0
		val, err := json.Marshal(stored)
		if err != nil {
			return nil, fmt.Errorf("task %s: %w", id, err)
		}
		base, args, err := encodeRecord(stored, val, cur, apart)
		if err != nil {
			return nil, fmt.Errorf("task %s: %w", id, err)
		}
		entry := s.auditEntry(cur, stored, val)
		ev, evVal, err := s.eventFor(cur, stored)
		if err != nil {
			return nil, fmt.Errorf("task %s: %w", id, err)
		}
		err = s.commitRecord(id, longer(base, args), evVal, func(txn *badger.Txn, rv *revisions) error {
			item, err := txn.Get(recordKey(id))
			if errors.Is(err, badger.ErrKeyNotFound) {
				return fmt.Errorf("task %s: %w", id, store.ErrNotFound)
			}
			if err != nil {
				return err
			}
			if item.Version() != version {
				return errStale
			}
			if keyDropped {
				if err := txn.Delete(idemKey(cur.IdempotencyKey)); err != nil {
					return err
				}
			}
			if err := rv.put(txn, stored, base, cur, entry); err != nil {
				return err
			}
			if err := putArgs(txn, id, base, args, apart); err != nil {
				return err
			}
			return rv.outbox(txn, ev, evVal)
		})
		if errors.Is(err, errStale) {
			continue
		}
		if err != nil {
			return nil, err
		}
		next.Revision = stored.Revision
		return next, nil
	}
}

// Get returns record id, or an error wrapping ErrNotFound.
func (s *Store) Get(id string) (*model.Task, error) {
	if err := s.hold(); err != nil {
		return nil, err
	}
	t, gen := s.recent.get(id)
	s.release()
	if t != nil {
		return t, nil
	}
	var size int
	err := s.view(func(txn *badger.Txn) error {
		item, err := lookup(txn, id)
		if err != nil {
			return err
		}
		t, size, err = decodeSized(txn, item, id)
		return err
	})
	if err != nil {
		return nil, err
	}
	s.recent.put(t, size, gen)
	return t, nil
}

// ByKey returns the record named by an idempotency key, or an error
// wrapping ErrNotFound.
func (s *Store) ByKey(key string) (*model.Task, error) {
	var t *model.Task
	err := s.view(func(txn *badger.Txn) error {
		var err error
		t, err = byKey(txn, key)
		return err
	})
	return t, err
}

// ByStatus returns the records with any of the given statuses, sorted by
// ID. It walks only those statuses' index keys: an open record is read
// from its index entry, a terminal one from under its record key.
func (s *Store) ByStatus(st ...model.Status) ([]*model.Task, error) {
	var out []*model.Task
	err := s.view(func(txn *badger.Txn) (err error) {
		out, err = byStatus(txn, st...)
		return err
	})
	if err != nil {
		return nil, s.damaged(err)
	}
	return out, nil
}

func byStatus(txn *badger.Txn, st ...model.Status) ([]*model.Task, error) {
	var buf arena
	var dec pipeline
	err := eachIndexed(txn, st, &buf, func(id string, v []byte) error {
		dec.add(id, v)
		return nil
	})
	out, werr := dec.wait()
	if err == nil {
		err = werr
	}
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b *model.Task) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// eachIndexed gives fn the id and record JSON (copied into buf) of each
// record the statuses' index keys name, status by status.
func eachIndexed(txn *badger.Txn, st []model.Status, buf *arena, fn func(id string, v []byte) error) error {
	for _, status := range dedupe(st) {
		prefix := statusPrefix(status)
		// Values are inline: read in place, unprefetched, one copy.
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
		for it.Rewind(); it.Valid(); it.Next() {
			id := string(it.Item().Key()[len(prefix):])
			v, err := indexedValue(txn, it.Item(), id, buf)
			if err == nil {
				err = fn(id, v)
			}
			if err != nil {
				it.Close()
				return err
			}
		}
		it.Close()
	}
	return nil
}

// Handles returns the handles of the records with any of the given
// statuses, sorted by ID, read from the same index entries as ByStatus,
// each decoded only as far as its handle, one record at a time: the
// owner's start reads them while the dashboard draws its first frame,
// and a decode of every field on both cores held that frame back.
func (s *Store) Handles(st ...model.Status) ([]model.Handle, error) {
	var out []model.Handle
	err := s.view(func(txn *badger.Txn) error {
		var buf arena
		return eachIndexed(txn, st, &buf, func(id string, v []byte) error {
			var h model.Handle
			if err := unmarshalHandle(v, &h); err != nil {
				return &store.DecodeError{Err: fmt.Errorf("task %s: record does not decode: %w", id, err)}
			}
			out = append(out, h)
			buf.reset() // nothing decoded points into it
			return nil
		})
	})
	if err != nil {
		return nil, s.damaged(err)
	}
	slices.SortFunc(out, func(a, b model.Handle) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// indexedValue copies into buf the record JSON for a status index entry:
// from the entry itself when it holds the record (open tasks), else from
// the record's own value (terminal records, and open ones in the version
// 1 layout).
func indexedValue(txn *badger.Txn, entry *badger.Item, id string, buf *arena) ([]byte, error) {
	var v []byte
	err := entry.Value(func(val []byte) error {
		if bytes.Equal(val, statusMark) {
			return nil
		}
		return withRecordValue(txn, id, val, func(full []byte) error { v = buf.copy(full); return nil })
	})
	if err != nil || v != nil {
		return v, err
	}
	item, err := txn.Get(recordKey(id))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, fmt.Errorf("status index names task %s, which has no record", id)
	}
	if err == nil {
		err = withRecordJSON(txn, item, id, func(val []byte) error { v = buf.copy(val); return nil })
	}
	if err != nil {
		return nil, fmt.Errorf("task %s: %w", id, err)
	}
	return v, nil
}

// arena hands out copies carved from large chunks: one allocation per
// record was a good part of the time to list them at start-up.
type arena struct{ chunk []byte }

const arenaChunk = 1 << 20

// reset reuses the chunk for the next copies: for copies read and let go.
func (a *arena) reset() { a.chunk = a.chunk[:0] }

func (a *arena) copy(v []byte) []byte {
	if len(v) > arenaChunk/4 {
		return bytes.Clone(v)
	}
	if cap(a.chunk)-len(a.chunk) < len(v) {
		a.chunk = make([]byte, 0, arenaChunk)
	}
	n := len(a.chunk)
	a.chunk = append(a.chunk, v...)
	return a.chunk[n:len(a.chunk):len(a.chunk)]
}

// pipeline decodes records on other cores while the caller reads on: at
// start-up, reading and decoding the open tasks is most of the time it
// takes to list them, and decoding only after the last read left the
// other cores idle while Badger's iterator ran.
type pipeline struct {
	wg      sync.WaitGroup
	batches []*decodeBatch
	next    *decodeBatch
}

// batchSize records go to one goroutine: enough to make its start-up
// cost nothing, few enough that the last batch does not keep the rest
// waiting.
const batchSize = 256

type decodeBatch struct {
	ids  []string
	vals [][]byte
	out  []*model.Task
	errs []error
}

func (p *pipeline) add(id string, v []byte) {
	if p.next == nil {
		p.next = &decodeBatch{ids: make([]string, 0, batchSize), vals: make([][]byte, 0, batchSize)}
	}
	p.next.ids, p.next.vals = append(p.next.ids, id), append(p.next.vals, v)
	if len(p.next.ids) == batchSize {
		p.send()
	}
}

func (p *pipeline) send() {
	b := p.next
	p.batches, p.next = append(p.batches, b), nil
	p.wg.Go(b.decode)
}

// wait returns every record added, in order, once all are decoded.
func (p *pipeline) wait() ([]*model.Task, error) {
	if p.next != nil {
		p.send()
	}
	p.wg.Wait()
	n := 0
	for _, b := range p.batches {
		n += len(b.vals)
	}
	out, errs := make([]*model.Task, 0, n), make([]error, 0, n)
	for _, b := range p.batches {
		out, errs = append(out, b.out...), append(errs, b.errs...)
	}
	return out, firstOf(errs)
}

func (b *decodeBatch) decode() {
	b.out, b.errs = make([]*model.Task, 0, len(b.vals)), make([]error, len(b.vals))
	for i, v := range b.vals {
		t := new(model.Task)
		if err := unmarshalRecord(v, t); err != nil {
			b.errs[i] = &store.DecodeError{Err: fmt.Errorf("task %s: record does not decode: %w", b.ids[i], err)}
			continue
		}
		b.out = append(b.out, t)
	}
}

// firstOf returns the first error, saying how many more there were: an
// error is one line, however many records are damaged.
func firstOf(errs []error) error {
	var first error
	more := 0
	for _, err := range errs {
		switch {
		case err == nil:
		case first == nil:
			first = err
		default:
			more++
		}
	}
	if more > 0 {
		return fmt.Errorf("%w (and %d more records that do not decode)", first, more)
	}
	return first
}

// OpenTasks returns every record that is not terminal: calling, working,
// input_required and orphaned. These are what a restart must re-attach to.
func (s *Store) OpenTasks() ([]*model.Task, error) {
	var open []model.Status
	for _, st := range model.AllStatuses {
		if !st.Terminal() {
			open = append(open, st)
		}
	}
	return s.ByStatus(open...)
}

// All returns every record, sorted by ID (IDs sort by creation time).
func (s *Store) All() ([]*model.Task, error) {
	var out []*model.Task
	err := s.view(func(txn *badger.Txn) (err error) {
		out, err = allRecords(txn)
		return err
	})
	return out, err
}

func allRecords(txn *badger.Txn) ([]*model.Task, error) {
	var out []*model.Task
	it := txn.NewIterator(badger.IteratorOptions{Prefix: recordPrefix, PrefetchValues: true, PrefetchSize: 100})
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		item := it.Item()
		id := string(item.Key()[len(recordPrefix):])
		t, err := decode(txn, item, id)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// MatchIDs returns up to limit ids of records that start or end with
// part, from a key-only pass over the record keys: no value is read.
func (s *Store) MatchIDs(part string, limit int) ([]string, error) {
	var out []string
	err := s.view(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: recordPrefix})
		defer it.Close()
		for it.Rewind(); it.Valid() && len(out) < limit; it.Next() {
			id := it.Item().Key()[len(recordPrefix):]
			if bytes.HasPrefix(id, []byte(part)) || bytes.HasSuffix(id, []byte(part)) {
				out = append(out, string(id))
			}
		}
		return nil
	})
	return out, err
}

// Newest returns up to limit records, newest first (ids sort by creation
// time). It reads only those records, however large the store.
func (s *Store) Newest(limit int) ([]*model.Task, error) {
	var out []*model.Task
	err := s.view(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: recordPrefix, Reverse: true, PrefetchValues: true, PrefetchSize: 100})
		defer it.Close()
		for it.Seek(append(bytes.Clone(recordPrefix), 0xff)); it.Valid() && len(out) < limit; it.Next() {
			item := it.Item()
			t, err := decode(txn, item, string(item.Key()[len(recordPrefix):]))
			if err != nil {
				return err
			}
			out = append(out, t)
		}
		return nil
	})
	return out, err
}

// Delete removes record id and its index keys in one txn; the audit log
// names the act a forget by by.
func (s *Store) Delete(id string, by model.Actor) error {
	act := &model.Act{Kind: model.ActForget, Actor: by}
	return s.commit(id, func(txn *badger.Txn, rv *revisions) error {
		t, _, err := getRecord(txn, id)
		if err != nil {
			return err
		}
		return rv.remove(txn, t, act)
	})
}

// Prune deletes terminal records last updated before cutoff (every
// terminal record when cutoff is zero) and returns how many it deleted.
// It works in chunks of pruneChunk records per txn, so an interruption
// leaves some pruned and the rest intact; running it again finishes. The
// audit log names each deletion a prune by by, and keeps the records'
// entries.
func (s *Store) Prune(cutoff time.Time, by model.Actor) (int, error) {
	act := &model.Act{Kind: model.ActPrune, Actor: by}
	due := func(t *model.Task) bool {
		return t.Status.Terminal() && (cutoff.IsZero() || t.UpdatedAt.Before(cutoff))
	}
	var ids []string
	err := s.view(func(txn *badger.Txn) error {
		for _, st := range model.AllStatuses {
			if !st.Terminal() {
				continue
			}
			for _, id := range indexIDs(txn, st) {
				t, _, err := getRecord(txn, id)
				if err != nil {
					return err
				}
				if due(t) {
					ids = append(ids, id)
				}
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	total := 0
	for chunk := range slices.Chunk(ids, pruneChunk) {
		n := 0
		err := s.commit("", func(txn *badger.Txn, rv *revisions) error {
			n = 0 // the txn may run again after a conflict
			for _, id := range chunk {
				// Re-read: another writer may have deleted it meanwhile.
				t, _, err := getRecord(txn, id)
				if errors.Is(err, store.ErrNotFound) {
					continue
				}
				if err != nil {
					return err
				}
				if !due(t) {
					continue
				}
				if err := rv.remove(txn, t, act); err != nil {
					return err
				}
				n++
			}
			return nil
		})
		if err != nil {
			return total, err
		}
		total += n
	}
	if total > 0 {
		// Deletes are tombstones that Badger drops only when compaction
		// reaches the last level: reclaim takes them there now (or marks
		// the store for the next Open to).
		err = s.reclaim()
	}
	return total, err
}

// compactIfPruned gives the space of pruned records back: it flattens the
// tree when the last session pruned. A failed flatten loses nothing, as
// compaction catches up in time, so it is tried again at the next open.
func (s *Store) compactIfPruned() error {
	err := s.view(func(txn *badger.Txn) error {
		_, err := txn.Get(compactKey)
		return err
	})
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if s.db.Flatten(2) != nil {
		return nil
	}
	return s.commit("", func(txn *badger.Txn, _ *revisions) error { return txn.Delete(compactKey) })
}

// getRecord reads and decodes record id, with the version Badger gave its
// last write.
func getRecord(txn *badger.Txn, id string) (*model.Task, uint64, error) {
	item, err := lookup(txn, id)
	if err != nil {
		return nil, 0, err
	}
	t, err := decode(txn, item, id)
	return t, item.Version(), err
}

// lookup returns the record-key item of id.
func lookup(txn *badger.Txn, id string) (*badger.Item, error) {
	item, err := txn.Get(recordKey(id))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, fmt.Errorf("task %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("task %s: %w", id, err)
	}
	return item, nil
}

// decode decodes the record whose record-key item is item.
func decode(txn *badger.Txn, item *badger.Item, id string) (*model.Task, error) {
	t, _, err := decodeSized(txn, item, id)
	return t, err
}

// decodeSized is decode that also returns the size of the record's JSON.
func decodeSized(txn *badger.Txn, item *badger.Item, id string) (*model.Task, int, error) {
	t := new(model.Task)
	var size int
	err := withRecordJSON(txn, item, id, func(v []byte) error {
		size = len(v)
		return unmarshalRecord(v, t)
	})
	if err != nil {
		return nil, 0, &store.DecodeError{Err: fmt.Errorf("task %s: record does not decode: %w", id, err)}
	}
	return t, size, nil
}

// withRecordJSON calls fn with the JSON of the record whose record-key
// item is item, following an open record's openRef to its index entry.
// The slice is valid only during fn.
func withRecordJSON(txn *badger.Txn, item *badger.Item, id string, fn func([]byte) error) error {
	var st model.Status
	var isRef bool
	err := item.Value(func(v []byte) error {
		if st, isRef = parseOpenRef(v); isRef {
			return nil
		}
		return withRecordValue(txn, id, v, fn)
	})
	if err != nil || !isRef {
		return err
	}
	entry, err := txn.Get(statusKey(st, id))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return fmt.Errorf("its %s index entry is missing", st)
	}
	if err != nil {
		return err
	}
	return entry.Value(func(v []byte) error { return withRecordValue(txn, id, v, fn) })
}

func byKey(txn *badger.Txn, key string) (*model.Task, error) {
	item, err := txn.Get(idemKey(key))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, fmt.Errorf("idempotency key %q: %w", key, store.ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	id, err := item.ValueCopy(nil)
	if err != nil {
		return nil, err
	}
	t, _, err := getRecord(txn, string(id))
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("idempotency key %q names task %s, which has no record", key, id)
	}
	return t, err
}

// putRecord writes a record and its status index entry; prev is the
// status it had ("" for a new record). An open record lives in its index
// entry, so that start-up lists the open tasks from one contiguous key
// range, and its record key holds openRef, rewritten on every change
// because Update's version check reads it. A terminal record lives under
// its record key and its entry holds statusMark. val is the record's
// value (codec.go).
func putRecord(txn *badger.Txn, t *model.Task, val []byte, prev model.Status) error {
	if prev != "" && prev != t.Status {
		if err := txn.Delete(statusKey(prev, t.ID)); err != nil {
			return err
		}
	}
	if !t.Status.Terminal() {
		if err := txn.Set(recordKey(t.ID), openRef(t.Status)); err != nil {
			return err
		}
		return txn.Set(statusKey(t.Status, t.ID), val)
	}
	if err := txn.Set(recordKey(t.ID), val); err != nil {
		return err
	}
	if prev == t.Status {
		return nil
	}
	return txn.Set(statusKey(t.Status, t.ID), statusMark)
}

// indexIDs lists the ids under one status, reading keys only.
func indexIDs(txn *badger.Txn, st model.Status) []string {
	prefix := statusPrefix(st)
	it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
	defer it.Close()
	var ids []string
	for it.Rewind(); it.Valid(); it.Next() {
		ids = append(ids, string(it.Item().Key()[len(prefix):]))
	}
	return ids
}

// deleteRecord removes a record, its arguments kept apart and its index
// keys.
func deleteRecord(txn *badger.Txn, t *model.Task) error {
	if err := txn.Delete(recordKey(t.ID)); err != nil {
		return err
	}
	if err := txn.Delete(statusKey(t.Status, t.ID)); err != nil {
		return err
	}
	if len(t.Arguments) >= argsApartMin {
		if err := txn.Delete(argsKey(t.ID)); err != nil {
			return err
		}
	}
	if t.IdempotencyKey == "" {
		return nil
	}
	return txn.Delete(idemKey(t.IdempotencyKey))
}

// longer is the longer of a and b: the value whose size decides whether
// a commit writes to the value log.
func longer(a, b []byte) []byte {
	if len(b) > len(a) {
		return b
	}
	return a
}

func dedupe(st []model.Status) []model.Status {
	out := slices.Clone(st)
	slices.Sort(out)
	return slices.Compact(out)
}
