package badger

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strconv"

	"github.com/dgraph-io/badger/v4/y"
)

// Badger replays a memtable WAL up to the first entry it cannot read and
// truncates the rest away, as it would a write torn by a crash. That is
// right for the tail: only the last commit can be torn, because every
// commit is synced before the next one is made (walsync.go). An entry
// that fails its checksum with a whole commit after it is damage, and
// replaying would drop every later record without a word; so would a WAL
// cut short, since Badger creates each WAL at its full size and writes
// into it. checkWAL refuses both before Badger can truncate.
//
// The entry layout is Badger's (memtable.go, encodeEntry): meta, user
// meta, uvarint key and value lengths and expiry, key, value, then a
// big-endian CRC-32C of all of it. A commit is its entries, marked
// bitTxn, then one bitFinTxn entry whose value is the commit timestamp.
const (
	walHeaderSize = 20 // a WAL starts with a key id and an IV
	bitTxn        = 1 << 6
	bitFinTxn     = 1 << 7
)

type walEntry struct {
	meta       byte
	key, value []byte
	size       int
}

// readWALEntry decodes the entry at off in b; ok is false when none
// starts there (damaged, torn, or the zeros after the last entry).
func readWALEntry(b []byte, off int) (e walEntry, ok bool) {
	if off+2 > len(b) {
		return e, false
	}
	p := off + 2
	var lens [3]uint64
	for i := range lens {
		v, n := binary.Uvarint(b[p:])
		if n <= 0 {
			return e, false
		}
		lens[i], p = v, p+n
	}
	klen, vlen := lens[0], lens[1]
	if klen == 0 || klen > 1<<16 || vlen > uint64(len(b)) || uint64(p)+klen+vlen+crc32.Size > uint64(len(b)) {
		return e, false
	}
	end := p + int(klen+vlen)
	if crc32.Checksum(b[off:end], y.CastagnoliCrcTable) != binary.BigEndian.Uint32(b[end:]) {
		return e, false
	}
	return walEntry{meta: b[off], key: b[p : p+int(klen)], value: b[p+int(klen) : end], size: end + crc32.Size - off}, true
}

// finTs is the commit timestamp a bitFinTxn entry closes, 0 if e is none.
func (e walEntry) finTs() uint64 {
	if e.meta&bitFinTxn == 0 {
		return 0
	}
	ts, err := strconv.ParseUint(string(e.value), 10, 64)
	if err != nil {
		return 0
	}
	return ts
}

// walSpan is the first and last commit timestamp a WAL holds (0 if none),
// and where its last whole commit ends.
type walSpan struct {
	first, last uint64
	end         int64
}

// checkWAL returns the commits the WAL at path holds, and why it is
// damaged or "". fullSize is the size Badger gives a new WAL.
func checkWAL(path string, fullSize int64) (span walSpan, reason string) {
	b, err := os.ReadFile(path)
	if err != nil || len(b) <= walHeaderSize {
		return span, "" // Badger reports what it cannot read, and an empty WAL holds nothing
	}
	// Replay it as Badger does, to the end of the last whole commit.
	off, validEnd := walHeaderSize, walHeaderSize
	var lastTs, txnTs uint64
	defer func() { span.last, span.end = lastTs, int64(validEnd) }()
	for {
		e, ok := readWALEntry(b, off)
		if !ok {
			break
		}
		if e.meta&bitTxn != 0 {
			ts := y.ParseTs(e.key)
			if txnTs != 0 && ts != txnTs {
				break
			}
			txnTs = ts
		} else if ts := e.finTs(); ts != 0 {
			if ts != txnTs {
				break
			}
			lastTs, txnTs, validEnd = ts, 0, off+e.size
			if span.first == 0 {
				span.first = ts
			}
		} else if txnTs != 0 {
			break
		} else {
			validEnd = off + e.size
		}
		off += e.size
	}
	name := filepath.Base(path)
	if int64(len(b)) < fullSize && validEnd != len(b) {
		return span, fmt.Sprintf("memtable WAL %s is cut short (%d bytes; its last whole commit ends at %d)", name, len(b), validEnd)
	}
	// Past the break only the commit after lastTs may lie, torn. Any
	// other whole commit there means the break is damage.
	for p := off + 1; p < len(b); p++ {
		if b[p]&bitFinTxn == 0 {
			continue
		}
		if e, ok := readWALEntry(b, p); ok {
			if ts := e.finTs(); ts != 0 && (lastTs == 0 || ts != lastTs+1) {
				return span, fmt.Sprintf("memtable WAL %s has a damaged entry at offset %d with commits after it", name, off)
			}
		}
	}
	return span, ""
}
