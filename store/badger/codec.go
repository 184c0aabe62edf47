package badger

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	badger "github.com/dgraph-io/badger/v4"
	segjson "github.com/segmentio/encoding/json"

	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store"
)

// unmarshalHandle decodes a record's JSON only as far as its handle: the
// other fields are skipped, nothing of them allocated.
func unmarshalHandle(v []byte, h *model.Handle) error {
	if _, rest, err := splitActors(v); err == nil {
		v = rest
	}
	if err := segjson.Unmarshal(v, h); err != nil {
		*h = model.Handle{}
		return json.Unmarshal(v, h)
	}
	return nil
}

// unmarshalRecord decodes a stored record (its JSON, after its actors'
// mask if it has one). Decoding the open tasks' JSON
// is most of start-up, and segmentio's decoder (already in the build
// through go-sdk) takes a fifth of encoding/json's time on a record. When
// it refuses a record, encoding/json decides, so nothing it accepted
// before is refused now and errors read as they always did. An empty
// history decodes as nil, whichever decoder ran.
func unmarshalRecord(v []byte, t *model.Task) error {
	mask, v, err := splitActors(v)
	if err != nil {
		return err
	}
	// segmentio starts a slice at 10 elements: 720 bytes of history per
	// record where 2 or 3 transitions are usual, and allocating them was a
	// sixth of the dashboard's start-up CPU. Counting the transitions first sizes it (a count
	// too high only wastes room; the decoder grows one too low).
	if n := bytes.Count(v, transitionStart); n > 0 {
		t.History = make([]model.Transition, 0, n)
	}
	err = segjson.Unmarshal(v, t)
	if err != nil {
		*t = model.Task{}
		err = json.Unmarshal(v, t)
	}
	if len(t.History) == 0 {
		t.History = nil
	}
	if err != nil || mask == nil {
		return err
	}
	return restoreActors(t, mask)
}

// transitionStart begins every marshalled model.Transition: At comes first
// and is never omitted. Inside a JSON string the quotes would be escaped.
var transitionStart = []byte(`{"at":`)

// Record values. A record is stored as its JSON, or, when its arguments
// are argsApartMin bytes or more, as argsApart followed by its JSON
// without them, the arguments under argsKey(id). Every poll that brings
// progress rewrites the record, and arguments never change after create:
// kept inline, each rewrite copied them again into the WAL, the memtable
// and every table compaction writes (10 tasks with 100 KB of arguments
// took 3.3× their live size on disk). Smaller arguments stay inline, so
// reading such a record is one read. A variable so that tests can write
// the schema 2 encoding (every record's arguments inline).
var argsApartMin = 1 << 10

// argsApart starts a record value whose arguments are kept apart. A JSON
// value starts with '{', an open record's reference with 0, statusMark is
// the single byte 1.
const argsApart = 2

// Actors kept once (schema 4). A record names the actor of its last
// change in its act, and Attribute copies that actor into the "by" of
// every history entry and answer the change added: a call's record held
// its caller three times, 133 bytes of every create at 64 writers. Such a
// record is stored as byAct, the mask (uvarint count of bits, then the
// bits, history entries first, then answers) of the entries whose "by"
// is the act's actor, and its value without those "by"s (JSON, or
// argsApart and the rest). Reading puts them back, so the record reads
// as it was given, and its JSON (get, ls --json, the audit's record
// hash) is unchanged.
const byAct = 3

// dropActors returns a copy of t without the "by"s that repeat its act's
// actor, and the header that stores them (byAct, the mask); nil when no
// "by" repeats it.
func dropActors(t *model.Task) (c model.Task, header []byte) {
	if t.Act == nil || t.Act.Actor.IsZero() {
		return c, nil
	}
	n := len(t.History) + len(t.Answers)
	mask := make([]byte, (n+7)/8)
	c = *t
	var hist, answers bool // cloned
	for i := range n {
		var by *model.Actor
		if i < len(t.History) {
			if !hist && t.History[i].By == t.Act.Actor {
				c.History, hist = slices.Clone(t.History), true
			}
			by = &c.History[i].By
		} else {
			if !answers && t.Answers[i-len(t.History)].By == t.Act.Actor {
				c.Answers, answers = slices.Clone(t.Answers), true
			}
			by = &c.Answers[i-len(t.History)].By
		}
		if *by == t.Act.Actor {
			*by = model.Actor{}
			mask[i/8] |= 1 << (i % 8)
		}
	}
	if !hist && !answers {
		return c, nil
	}
	return c, append(binary.AppendUvarint([]byte{byAct}, uint64(n)), mask...)
}

// splitActors splits a stored record into its actors' mask (nil when it
// has none) and its JSON.
func splitActors(v []byte) (mask, rest []byte, err error) {
	if len(v) == 0 || v[0] != byAct {
		return nil, v, nil
	}
	n, w := binary.Uvarint(v[1:])
	if w <= 0 || n > uint64(len(v)) || 1+w+int((n+7)/8) > len(v) {
		return nil, nil, errors.New("its actors' mask is cut short")
	}
	end := 1 + w + int((n+7)/8)
	return v[1:end], v[end:], nil
}

// restoreActors puts back into t the "by"s its mask (splitActors's:
// count, then bits) says were its act's actor.
func restoreActors(t *model.Task, mask []byte) error {
	n, w := binary.Uvarint(mask)
	if int(n) != len(t.History)+len(t.Answers) || t.Act == nil {
		return fmt.Errorf("its actors' mask names %d entries, it has %d", n, len(t.History)+len(t.Answers))
	}
	bits := mask[w:]
	for i := range int(n) {
		if bits[i/8]&(1<<(i%8)) == 0 {
			continue
		}
		if i < len(t.History) {
			t.History[i].By = t.Act.Actor
		} else {
			t.Answers[i-len(t.History)].By = t.Act.Actor
		}
	}
	return nil
}

// encodeRecord returns the value that stores t, whose JSON is full, and
// the arguments to write under argsKey: nil when they stay inline, or
// when prev, the record t replaces, has the same ones there already
// (prevApart): polls rewrite the record, never its arguments. The
// arguments are stored as full holds them: json.Marshal compacts them.
func encodeRecord(t *model.Task, full []byte, prev *model.Task, prevApart, whole bool) (val, args []byte, err error) {
	var c model.Task
	var header []byte
	if !whole {
		c, header = dropActors(t)
	}
	apart := len(t.Arguments) >= argsApartMin
	if !apart && header == nil {
		return full, nil, nil
	}
	if header == nil {
		c = *t
	}
	// A poll leaves the arguments as read, the stored bytes: compare
	// before compacting them again.
	if apart && (!prevApart || !bytes.Equal(prev.Arguments, t.Arguments)) {
		if args, err = json.Marshal(t.Arguments); err != nil {
			return nil, nil, err
		}
		if prevApart && bytes.Equal(prev.Arguments, args) {
			args = nil
		}
	}
	if apart {
		c.Arguments = nil
		header = append(header, argsApart)
	}
	rest, err := json.Marshal(&c)
	if err != nil {
		return nil, nil, err
	}
	return append(header, rest...), args, nil
}

// withRecordValue calls fn with the JSON of record id, whose stored value
// is v: v itself, or v with the arguments kept apart put back in. The
// slice is valid only during fn.
func withRecordValue(txn *badger.Txn, id string, v []byte, fn func([]byte) error) error {
	_, rest, err := splitActors(v)
	if err != nil {
		return &store.DecodeError{Err: fmt.Errorf("task %s: %w", id, err)}
	}
	if !keepsArgsApart(v) {
		return fn(v)
	}
	head := v[:len(v)-len(rest)] // byAct and the mask, if any
	v = rest
	item, err := txn.Get(argsKey(id))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return &store.DecodeError{Err: fmt.Errorf("task %s: its arguments are missing", id)}
	}
	if err != nil {
		return err
	}
	return item.Value(func(args []byte) error { return fn(joinArgs(head, v[1:], args)) })
}

// joinArgs puts args back into rest, a record's JSON without them, as its
// first field (decoding does not depend on the order of fields), after
// head.
func joinArgs(head, rest, args []byte) []byte {
	out := make([]byte, 0, len(head)+len(rest)+len(args)+len(`"arguments":,`))
	out = append(append(out, head...), `{"arguments":`...)
	out = append(out, args...)
	if len(rest) > 2 {
		out = append(out, ',')
	}
	return append(out, rest[1:]...)
}

// putArgs writes args (encodeRecord's) under id's key, or deletes the
// arguments kept there (prevApart) once val, the record's new value,
// holds them inline.
func putArgs(txn *badger.Txn, id string, val, args []byte, prevApart bool) error {
	switch {
	case args != nil:
		return txn.Set(argsKey(id), args)
	case prevApart && !keepsArgsApart(val):
		return txn.Delete(argsKey(id))
	}
	return nil
}

// keepsArgsApart tells whether the record value val keeps its arguments
// apart.
func keepsArgsApart(val []byte) bool {
	_, rest, err := splitActors(val)
	return err == nil && len(rest) > 0 && rest[0] == argsApart
}

// hasArgs tells whether record id keeps its arguments apart.
func hasArgs(txn *badger.Txn, id string) (bool, error) {
	_, err := txn.Get(argsKey(id))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return false, nil
	}
	return err == nil, err
}
