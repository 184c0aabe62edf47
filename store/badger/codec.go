package badger

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	badger "github.com/dgraph-io/badger/v4"
	segjson "github.com/segmentio/encoding/json"

	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store"
)

// unmarshalHandle decodes a record's JSON only as far as its handle: the
// other fields are skipped, nothing of them allocated.
func unmarshalHandle(v []byte, h *model.Handle) error {
	if err := segjson.Unmarshal(v, h); err != nil {
		*h = model.Handle{}
		return json.Unmarshal(v, h)
	}
	return nil
}

// unmarshalRecord decodes a stored record. Decoding the open tasks' JSON
// is most of start-up, and segmentio's decoder (already in the build
// through go-sdk) takes a fifth of encoding/json's time on a record. When
// it refuses a record, encoding/json decides, so nothing it accepted
// before is refused now and errors read as they always did. An empty
// history decodes as nil, whichever decoder ran.
func unmarshalRecord(v []byte, t *model.Task) error {
	// segmentio starts a slice at 10 elements: 720 bytes of history per
	// record where 2 or 3 transitions are usual, and allocating them was a
	// sixth of the dashboard's start-up CPU. Counting the transitions first sizes it (a count
	// too high only wastes room; the decoder grows one too low).
	if n := bytes.Count(v, transitionStart); n > 0 {
		t.History = make([]model.Transition, 0, n)
	}
	err := segjson.Unmarshal(v, t)
	if err != nil {
		*t = model.Task{}
		err = json.Unmarshal(v, t)
	}
	if len(t.History) == 0 {
		t.History = nil
	}
	return err
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

// encodeRecord returns the value that stores t, whose JSON is full, and
// the arguments to write under argsKey: nil when they stay inline, or
// when prev, the record t replaces, has the same ones there already
// (prevApart): polls rewrite the record, never its arguments. The
// arguments are stored as full holds them: json.Marshal compacts them.
func encodeRecord(t *model.Task, full []byte, prev *model.Task, prevApart bool) (val, args []byte, err error) {
	if len(t.Arguments) < argsApartMin {
		return full, nil, nil
	}
	// A poll leaves the arguments as read, the stored bytes: compare
	// before compacting them again.
	if !prevApart || !bytes.Equal(prev.Arguments, t.Arguments) {
		if args, err = json.Marshal(t.Arguments); err != nil {
			return nil, nil, err
		}
		if prevApart && bytes.Equal(prev.Arguments, args) {
			args = nil
		}
	}
	c := *t
	c.Arguments = nil
	rest, err := json.Marshal(&c)
	if err != nil {
		return nil, nil, err
	}
	return append([]byte{argsApart}, rest...), args, nil
}

// withRecordValue calls fn with the JSON of record id, whose stored value
// is v: v itself, or v with the arguments kept apart put back in. The
// slice is valid only during fn.
func withRecordValue(txn *badger.Txn, id string, v []byte, fn func([]byte) error) error {
	if len(v) == 0 || v[0] != argsApart {
		return fn(v)
	}
	item, err := txn.Get(argsKey(id))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return &store.DecodeError{Err: fmt.Errorf("task %s: its arguments are missing", id)}
	}
	if err != nil {
		return err
	}
	return item.Value(func(args []byte) error { return fn(joinArgs(v[1:], args)) })
}

// joinArgs puts args back into rest, a record's JSON without them, as its
// first field: decoding does not depend on the order of fields.
func joinArgs(rest, args []byte) []byte {
	out := make([]byte, 0, len(rest)+len(args)+len(`"arguments":,`))
	out = append(out, `{"arguments":`...)
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
	case prevApart && val[0] != argsApart:
		return txn.Delete(argsKey(id))
	}
	return nil
}

// hasArgs tells whether record id keeps its arguments apart.
func hasArgs(txn *badger.Txn, id string) (bool, error) {
	_, err := txn.Get(argsKey(id))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return false, nil
	}
	return err == nil, err
}
