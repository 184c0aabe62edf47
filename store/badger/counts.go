package badger

import (
	"github.com/taskdeck/taskdeck/store"

	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/taskdeck/taskdeck/model"
)

// Counts per status. Every commit that changes records writes, in its
// txn, how many records each status holds as of its last revision, so a
// watcher's counts cost one read however large the store. A store whose
// counts key is missing or older than its revision (written before this
// key existed, or by older code) is counted from its status index.

// statusCounts is the number of records per status, in model.AllStatuses
// order: a value, so a txn's copy of the revision state copies it.
type statusCounts [10]int64

// olderCounts is the length of the counts key written before the found
// and left statuses existed: such a key is recounted from the index.
const olderCounts = 8 * (1 + 8)

func statusIndex(st model.Status) int { return slices.Index(model.AllStatuses, st) }

// move counts a record that went from one status to another ("" for
// none: created or deleted).
func (c *statusCounts) move(from, to model.Status) {
	if i := statusIndex(from); i >= 0 {
		c[i]--
	}
	if i := statusIndex(to); i >= 0 {
		c[i]++
	}
}

func (c *statusCounts) asMap() map[model.Status]int {
	out := map[model.Status]int{}
	for i, n := range c {
		if n > 0 {
			out[model.AllStatuses[i]] = int(n)
		}
	}
	return out
}

// value is the counts key's value: the revision, then each count, 8
// bytes big-endian each.
func (c *statusCounts) value(rev uint64) []byte {
	v := binary.BigEndian.AppendUint64(make([]byte, 0, 8*(1+len(c))), rev)
	for _, n := range c {
		v = binary.BigEndian.AppendUint64(v, uint64(n))
	}
	return v
}

// readCounts reads the counts as of m.rev, from the counts key when it
// is as new, else from the status index.
func readCounts(txn *badger.Txn, m revMeta) (statusCounts, error) {
	var c statusCounts
	item, err := txn.Get(countsKey)
	switch {
	case errors.Is(err, badger.ErrKeyNotFound):
		return countIndex(txn)
	case err != nil:
		return c, err
	}
	fresh := false
	err = item.Value(func(v []byte) error {
		if len(v) == olderCounts {
			return nil
		}
		if len(v) != 8*(1+len(c)) {
			return &store.DecodeError{Err: fmt.Errorf("the counts per status are %d bytes, not %d", len(v), 8*(1+len(c)))}
		}
		if binary.BigEndian.Uint64(v) != m.rev {
			return nil
		}
		fresh = true
		for i := range c {
			c[i] = int64(binary.BigEndian.Uint64(v[8*(i+1):]))
		}
		return nil
	})
	if err != nil || fresh {
		return c, err
	}
	return countIndex(txn)
}

// countIndex counts the status index's keys.
func countIndex(txn *badger.Txn) (statusCounts, error) {
	var c statusCounts
	it := txn.NewIterator(badger.IteratorOptions{Prefix: statusRoot})
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		st, _, ok := splitStatusKey(it.Item().Key())
		i := statusIndex(st)
		if !ok || i < 0 {
			return c, fmt.Errorf("malformed status index key %q", it.Item().Key())
		}
		c[i]++
	}
	return c, nil
}

// Counts returns how many records have each status (statuses with none
// are absent): one read of the counts key.
func (s *Store) Counts() (map[model.Status]int, error) {
	_, counts, err := s.CountsAt()
	return counts, err
}

// CountsAt returns the counts per status and the revision they are as
// of, read in one transaction.
func (s *Store) CountsAt() (rev uint64, counts map[model.Status]int, err error) {
	var c statusCounts
	err = s.view(func(txn *badger.Txn) error {
		m, _, err := readMeta(txn)
		if err != nil {
			return err
		}
		rev = m.rev
		c, err = readCounts(txn, m)
		return err
	})
	if err != nil {
		return 0, nil, s.damaged(err)
	}
	return rev, c.asMap(), nil
}

// Window returns, read in one transaction: the store's revision, every
// open record (sorted by id), the newest finished records up to
// finished (newest first), and the number of records per status. It
// reads only those records, however many finished ones the store holds.
func (s *Store) Window(finished int) (w store.Window, err error) {
	err = s.view(func(txn *badger.Txn) error {
		m, _, err := readMeta(txn)
		if err != nil {
			return err
		}
		w.Rev = m.rev
		c, err := readCounts(txn, m)
		if err != nil {
			return err
		}
		w.Counts = c.asMap()
		if w.Open, err = byStatus(txn, openStatuses()...); err != nil {
			return err
		}
		w.Finished, err = page(txn, "", finished, terminalStatuses())
		return err
	})
	if err != nil {
		return store.Window{}, s.damaged(err)
	}
	return w, nil
}

// Page returns up to limit records older than before (from the newest
// when before is ""), newest first; with statuses, only records in one of
// them. It walks the record keys backwards from before, or the statuses'
// index keys: it reads only what it returns and the open records it
// skips (those keys hold no record).
func (s *Store) Page(before string, limit int, statuses ...model.Status) ([]*model.Task, error) {
	var out []*model.Task
	err := s.view(func(txn *badger.Txn) (err error) {
		out, err = page(txn, before, limit, statuses)
		return err
	})
	return out, s.damaged(err)
}

func openStatuses() []model.Status {
	return slices.DeleteFunc(slices.Clone(model.AllStatuses), model.Status.Terminal)
}

func terminalStatuses() []model.Status {
	return slices.DeleteFunc(slices.Clone(model.AllStatuses), func(st model.Status) bool { return !st.Terminal() })
}

// cursor walks one key range backwards from before (exclusive), giving
// the id of each key.
type cursor struct {
	it     *badger.Iterator
	prefix []byte
}

func newCursor(txn *badger.Txn, prefix []byte, before string) *cursor {
	c := &cursor{it: txn.NewIterator(badger.IteratorOptions{Prefix: prefix, Reverse: true}), prefix: prefix}
	if before == "" {
		c.it.Seek(append(bytes.Clone(prefix), 0xff))
	} else {
		c.it.Seek(append(bytes.Clone(prefix), before...))
		if c.it.Valid() && c.id() == before {
			c.it.Next()
		}
	}
	return c
}

// isOpenRef reports whether a record key holds an open record's
// reference (a value no JSON starts with), not the record.
func isOpenRef(item *badger.Item) bool {
	open := false
	_ = item.Value(func(v []byte) error {
		_, open = parseOpenRef(v)
		return nil
	})
	return open
}

func (c *cursor) id() string { return string(c.it.Item().Key()[len(c.prefix):]) }

// page reads up to limit records older than before, newest first: from
// the record keys, or merged from the index keys of statuses.
func page(txn *badger.Txn, before string, limit int, statuses []model.Status) ([]*model.Task, error) {
	if limit <= 0 {
		return nil, nil
	}
	var out []*model.Task
	finished := slices.Equal(dedupe(statuses), dedupe(terminalStatuses()))
	if len(statuses) == 0 || finished {
		// The record keys, newest first: a finished record is its value,
		// read in order; an open one's key holds only a reference (and
		// there are few), skipped unread when only finished ones are asked.
		c := newCursor(txn, recordPrefix, before)
		defer c.it.Close()
		for ; c.it.Valid() && len(out) < limit; c.it.Next() {
			if finished && isOpenRef(c.it.Item()) {
				continue
			}
			t, err := decode(txn, c.it.Item(), c.id())
			if err != nil {
				return nil, err
			}
			out = append(out, t)
		}
		return out, nil
	}
	var cs []*cursor
	for _, st := range dedupe(statuses) {
		c := newCursor(txn, statusPrefix(st), before)
		defer c.it.Close()
		cs = append(cs, c)
	}
	var buf arena
	for len(out) < limit {
		var next *cursor
		for _, c := range cs {
			if c.it.Valid() && (next == nil || c.id() > next.id()) {
				next = c
			}
		}
		if next == nil {
			break
		}
		id := next.id()
		v, err := indexedValue(txn, next.it.Item(), id, &buf)
		if err != nil {
			return nil, err
		}
		t := new(model.Task)
		if err := unmarshalRecord(v, t); err != nil {
			return nil, &store.DecodeError{Err: fmt.Errorf("task %s: record does not decode: %w", id, err)}
		}
		out = append(out, t)
		next.it.Next()
	}
	return out, nil
}
