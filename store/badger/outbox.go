package badger

import (
	"github.com/taskdeck/taskdeck/store"

	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/taskdeck/taskdeck/model"
)

// The outbox (issue 27). A change that some configured endpoint wants to
// hear of commits its event in the same txn as the record:
//
//	e\x00<rev>             the event of the change at rev (eventValue)
//	o\x00<rev><endpoint>   one entry per endpoint still to be told of it:
//	                       empty (due, no attempt yet) or the time it is
//	                       due again (8 bytes, unix ns) and the failed
//	                       attempts (4 bytes), both big-endian
//	O\x00<endpoint>        what the endpoint was told so far (EndpointStats)
//
// An entry goes once its endpoint took the event or its retry window ran
// out (counted as expired), and the event with its last entry: the outbox
// holds at most the events of the last retry window.
var (
	eventPrefix   = []byte("e\x00")
	pendingPrefix = []byte("o\x00")
	statsPrefix   = []byte("O\x00")
)

var _ store.Outbox = (*Store)(nil)

// An event as stored: when it was committed (8 bytes, unix ns, big-endian),
// its id's length (1 byte), its id, then its body as given, not encoded
// again, which a write pays for.
func eventValue(id string, at time.Time, body []byte) ([]byte, error) {
	if len(id) > 255 {
		return nil, fmt.Errorf("event id %q is longer than 255 bytes", id[:32])
	}
	v := make([]byte, 0, 9+len(id)+len(body))
	v = binary.BigEndian.AppendUint64(v, uint64(at.UnixNano()))
	v = append(append(v, byte(len(id))), id...)
	return append(v, body...), nil
}

func parseEvent(v []byte) (id string, at time.Time, body []byte, err error) {
	if len(v) < 9 || len(v) < 9+int(v[8]) {
		return "", at, nil, fmt.Errorf("the event is %d bytes, cut short", len(v))
	}
	n := 9 + int(v[8])
	return string(v[9:n]), time.Unix(0, int64(binary.BigEndian.Uint64(v))).UTC(), bytes.Clone(v[n:]), nil
}

// SetEvents implements Outbox. It must be called before the store is
// shared.
func (s *Store) SetEvents(fn store.EventFunc) { s.events = fn }

// eventFor is the stored form of the event of a change, or nil.
func (s *Store) eventFor(prev, next *model.Task) (*store.Event, []byte, error) {
	if s.events == nil {
		return nil, nil, nil
	}
	ev := s.events(prev, next)
	if ev == nil || len(ev.Endpoints) == 0 {
		return nil, nil, nil
	}
	val, err := eventValue(ev.ID, time.Now(), ev.Body)
	return ev, val, err
}

// outbox commits ev (val, its stored form) as the event of the change at
// the txn's last revision.
func (r *revisions) outbox(txn *badger.Txn, ev *store.Event, val []byte) error {
	if ev == nil {
		return nil
	}
	return setEvent(txn, r.meta.rev, ev, val)
}

// setEvent writes ev (val, its stored form) at rev, with an entry due at
// once for each of its endpoints.
func setEvent(txn *badger.Txn, rev uint64, ev *store.Event, val []byte) error {
	if err := txn.Set(revKey(eventPrefix, rev), val); err != nil {
		return err
	}
	for _, ep := range ev.Endpoints {
		if err := txn.Set(append(revKey(pendingPrefix, rev), ep...), nil); err != nil {
			return err
		}
	}
	return nil
}

// OutboxAdd implements store.Outbox, in a txn of its own.
func (s *Store) OutboxAdd(ev *store.Event) error {
	if ev == nil || len(ev.Endpoints) == 0 {
		return nil
	}
	now := time.Now()
	val, err := eventValue(ev.ID, now, ev.Body)
	if err != nil {
		return err
	}
	rev := store.SoloRev(now)
	// Keyed apart from every record's id, as OutboxDone's.
	return s.commitValues("\x00outbox\x00"+ev.ID, func(txn *badger.Txn, _ *revisions) error {
		return setEvent(txn, rev, ev, val)
	}, len(val))
}

// Outbox implements Outbox: the sole owner needs no claim, so lease is
// not used.
func (s *Store) Outbox(limit int, _ time.Duration) ([]store.OutboxEntry, error) {
	var out []store.OutboxEntry
	err := s.view(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: pendingPrefix})
		defer it.Close()
		var id string
		var at time.Time
		var body []byte
		var evRev uint64
		now := time.Now().UnixNano()
		for it.Rewind(); it.Valid() && len(out) < limit; it.Next() {
			k := it.Item().Key()
			if len(k) <= len(pendingPrefix)+8 {
				return &store.DecodeError{Err: fmt.Errorf("malformed outbox key %q", k)}
			}
			var due int64
			var attempts int
			if err := it.Item().Value(func(v []byte) error {
				if len(v) == 12 {
					due, attempts = int64(binary.BigEndian.Uint64(v)), int(binary.BigEndian.Uint32(v[8:]))
				}
				return nil
			}); err != nil {
				return err
			}
			if due > now {
				continue
			}
			rev := binary.BigEndian.Uint64(k[len(pendingPrefix):])
			if rev != evRev {
				item, err := txn.Get(revKey(eventPrefix, rev))
				if err != nil {
					return fmt.Errorf("outbox entry %d: %w", rev, err)
				}
				if err := item.Value(func(v []byte) (err error) {
					id, at, body, err = parseEvent(v)
					return err
				}); err != nil {
					return &store.DecodeError{Err: fmt.Errorf("outbox event %d: %w", rev, err)}
				}
				evRev = rev
			}
			out = append(out, store.OutboxEntry{Rev: rev, Endpoint: string(k[len(pendingPrefix)+8:]), ID: id, At: at, Body: body, Attempts: attempts})
		}
		return nil
	})
	return out, s.damaged(err)
}

// OutboxRelease implements store.Outbox: one process delivers a Badger
// store's events, so Outbox claims nothing and there is nothing to give
// back.
func (s *Store) OutboxRelease([]store.OutboxEntry) error { return nil }

// OutboxDone implements Outbox.
func (s *Store) OutboxDone(e store.OutboxEntry, o store.Outcome, errText string, retryAt time.Time) error {
	key := append(revKey(pendingPrefix, e.Rev), e.Endpoint...)
	statsKey := append(bytes.Clone(statsPrefix), e.Endpoint...)
	// Keyed apart from every record's id, so that it joins a group.
	return s.commit("\x00outbox\x00"+string(key), func(txn *badger.Txn, _ *revisions) error {
		st, err := readStats(txn, statsKey)
		if err != nil {
			return err
		}
		now := time.Now().UTC()
		switch o {
		case store.Delivered:
			st.Delivered++
			st.LastOK, st.Failing = now, false
		case store.Expired:
			st.Expired++
		}
		if o != store.Delivered {
			st.LastError, st.LastErrorAt, st.Failing = errText, now, true
		}
		if o != store.Failed {
			if err := s.dropPending(txn, key, e.Rev); err != nil {
				return err
			}
		} else if err := retryLater(txn, key, retryAt, e.Attempts+1); err != nil {
			return err
		}
		v, err := json.Marshal(st)
		if err != nil {
			return err
		}
		return txn.Set(statsKey, v)
	})
}

// retryLater makes a pending entry due again at at, unless it went
// meanwhile.
func retryLater(txn *badger.Txn, key []byte, at time.Time, attempts int) error {
	if _, err := txn.Get(key); err != nil {
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		return err
	}
	v := binary.BigEndian.AppendUint64(nil, uint64(at.UnixNano()))
	return txn.Set(key, binary.BigEndian.AppendUint32(v, uint32(attempts)))
}

// dropPending deletes an entry, and its event with the last one.
func (s *Store) dropPending(txn *badger.Txn, key []byte, rev uint64) error {
	if _, err := txn.Get(key); errors.Is(err, badger.ErrKeyNotFound) {
		return nil // delivered twice (at least once); counted all the same
	}
	if err := txn.Delete(key); err != nil {
		return err
	}
	prefix := revKey(pendingPrefix, rev)
	it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix, PrefetchValues: false})
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		if !bytes.Equal(it.Item().Key(), key) {
			return nil
		}
	}
	return txn.Delete(revKey(eventPrefix, rev))
}

func readStats(txn *badger.Txn, key []byte) (store.EndpointStats, error) {
	var st store.EndpointStats
	item, err := txn.Get(key)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return st, nil
	}
	if err != nil {
		return st, err
	}
	err = item.Value(func(v []byte) error { return json.Unmarshal(v, &st) })
	st.Pending = 0
	return st, err
}

// OutboxStats implements Outbox.
func (s *Store) OutboxStats() (map[string]store.EndpointStats, error) {
	out := map[string]store.EndpointStats{}
	err := s.view(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: statsPrefix})
		for it.Rewind(); it.Valid(); it.Next() {
			ep := string(it.Item().Key()[len(statsPrefix):])
			st, err := readStats(txn, it.Item().KeyCopy(nil))
			if err != nil {
				it.Close()
				return err
			}
			out[ep] = st
		}
		it.Close()
		pend := txn.NewIterator(badger.IteratorOptions{Prefix: pendingPrefix, PrefetchValues: false})
		defer pend.Close()
		// Each event's commit time is read once: its entries are adjacent.
		var lastRev uint64
		var at time.Time
		for pend.Rewind(); pend.Valid(); pend.Next() {
			k := pend.Item().Key()
			if len(k) <= len(pendingPrefix)+8 {
				continue
			}
			if rev := binary.BigEndian.Uint64(k[len(pendingPrefix):]); rev != lastRev {
				var err error
				if at, err = eventAt(txn, rev); err != nil {
					return err
				}
				lastRev = rev
			}
			ep := string(k[len(pendingPrefix)+8:])
			st := out[ep]
			st.Pending++
			if st.Oldest.IsZero() || at.Before(st.Oldest) {
				st.Oldest = at
			}
			out[ep] = st
		}
		return nil
	})
	return out, s.damaged(err)
}

// eventAt is when the event at rev was committed.
func eventAt(txn *badger.Txn, rev uint64) (time.Time, error) {
	item, err := txn.Get(revKey(eventPrefix, rev))
	if err != nil {
		return time.Time{}, fmt.Errorf("outbox entry %d: %w", rev, err)
	}
	var at time.Time
	err = item.Value(func(v []byte) error {
		if len(v) < 8 {
			return &store.DecodeError{Err: fmt.Errorf("outbox event %d is %d bytes, cut short", rev, len(v))}
		}
		at = time.Unix(0, int64(binary.BigEndian.Uint64(v))).UTC()
		return nil
	})
	return at, err
}
