package badger

import (
	"bytes"
	"encoding/binary"

	"github.com/taskdeck/taskdeck/model"
)

// Key layout. Every prefix ends in a zero byte so that one prefix can
// never match the start of another ("s\x00work" vs "s\x00working").
//
//	t\x00<id>               the record (a record value, codec.go) once
//	                        it is terminal; while it is open,
//	                        openRef(status)
//	s\x00<status>\x00<id>   the record value while it is open, else
//	                        statusMark         (status index)
//	A\x00<id>               the record's arguments when its value keeps
//	                        them apart (codec.go); written at create
//	k\x00<key>              id                 (idempotency index)
//	v\x00                   schemaVersion
//	c\x00                   set by a prune: compact at the next open
//	r\x00<rev>              id of the live record whose last change is
//	                        rev (revision index; rev is 8 bytes, big-endian)
//	d\x00<rev>              id of the record deleted at rev (tombstone)
//	n\x00                   the replay floor, 8 bytes big-endian (the
//	                        revision is the highest r or d key)
//	m\x00                   the records per status as of a revision
//	                        (counts.go); written by every commit that
//	                        changes records
//	a\x00<rev>              one audit entry, and its hash (audit.go)
//	a\x00<last><first>      a commit's audit entries first..last (a run),
//	                        and the last one's hash (schema 4)
//	p\x00                   the audit checkpoint: the revision and hash of
//	                        the last entry pruned
var (
	recordPrefix = []byte("t\x00")
	statusRoot   = []byte("s\x00")
	keyPrefix    = []byte("k\x00")
	schemaKey    = []byte("v\x00")
	compactKey   = []byte("c\x00")
	revPrefix    = []byte("r\x00")
	tombPrefix   = []byte("d\x00")
	metaKey      = []byte("n\x00")
	countsKey    = []byte("m\x00")
	argsPrefix   = []byte("A\x00")
)

// statusMark is a terminal record's index value. One byte can never be a
// record's JSON, which tells it from the record an open task's entry holds.
var statusMark = []byte{1}

// openRef is an open record's value under its record key: the status
// whose index entry holds the record. JSON never starts with a zero byte.
func openRef(st model.Status) []byte { return append([]byte{0}, st...) }

func parseOpenRef(v []byte) (model.Status, bool) {
	if len(v) > 0 && v[0] == 0 {
		return model.Status(v[1:]), true
	}
	return "", false
}

// schemaVersion is bumped when the layout or the record encoding changes
// in a way older code must not read. Version 1 kept every record under
// its record key; version 2 kept every record's arguments in its value;
// version 3 kept every audit entry under a key of its own. This code
// reads them all as they are (see checkSchema).
const schemaVersion = "4"

func recordKey(id string) []byte { return append(bytes.Clone(recordPrefix), id...) }

func statusPrefix(st model.Status) []byte {
	k := append(bytes.Clone(statusRoot), st...)
	return append(k, 0)
}

func statusKey(st model.Status, id string) []byte { return append(statusPrefix(st), id...) }

func argsKey(id string) []byte { return append(bytes.Clone(argsPrefix), id...) }

func idemKey(key string) []byte { return append(bytes.Clone(keyPrefix), key...) }

// splitStatusKey returns the status and id of a status index key.
func splitStatusKey(k []byte) (model.Status, string, bool) {
	st, id, ok := bytes.Cut(k[len(statusRoot):], []byte{0})
	return model.Status(st), string(id), ok
}

func revKey(prefix []byte, rev uint64) []byte {
	return binary.BigEndian.AppendUint64(bytes.Clone(prefix), rev)
}
