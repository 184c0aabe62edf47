package badger

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store"
)

// The audit log. Every change a commit makes (rv.put, rv.remove) appends
// its entry in the same txn, chained by the group's leader as it hands
// out the revisions; the chain's head, the last entry's hash, is in
// revMeta. An entry is stored as its canonical bytes (model.AuditBody),
// or packed (see packAudit). The entries of one commit share one key (a
// run): a run of one entry is a\x00<rev> holding the entry's 32-byte
// hash, then the entry; a longer run, first..last, is
// a\x00<last><first> holding the last entry's hash, then each entry
// after its length (uvarint). The hashes before the last are not stored:
// a reader recomputes them from the entries and the hash before them,
// and only the last one's shows a rewrite of any. At 64 writers a run a
// commit writes one key where an entry a key wrote one a record
// (BenchmarkAuditedCreate, x-entrykeys). A run is read from its first revision on by
// seeking a\x00<first>, since it sorts by its last. A pruned log starts
// after the checkpoint (p\x00: the revision and hash of the last entry
// pruned).
var (
	auditPrefix   = []byte("a\x00")
	checkpointKey = []byte("p\x00")
)

// auditChunk bounds the keys (runs) one audit prune txn deletes: well
// within Badger's 1,638 entries a txn at a 1 MiB memtable (see
// pruneChunk).
const auditChunk = 1000

// maxRunBytes bounds the value of one run (a commit's later entries start
// another): far below any sizing's value threshold, so that a run stays
// in the LSM tree, which the WAL's sync makes durable.
const maxRunBytes = 16 << 10

// engineActor names the Badger store's own changes: its only engine is
// this process's, on this host.
var engineActor = model.EngineActor("")

// auditEntry is the audit entry of a write of t (as base) over prev,
// made before the commit: the group's leader, which runs every change of
// a group one after the other, then only chains it.
func (s *Store) auditEntry(prev, t *model.Task, base []byte) entry {
	return sealEntry(s.auditKey, model.NewAuditBody(prev, t, base, t.Act, time.Now()))
}

// entry is an audit entry: its canonical bytes, which the chain hashes,
// and the form it is stored in.
type entry struct{ canon, stored []byte }

// sealEntry seals b with key (model.SealAudit) and packs it. Its
// canonical bytes are made in one buffer and sealed in place.
func sealEntry(key []byte, b model.AuditBody) entry {
	canon := b.AppendJSON(make([]byte, 0, 384))
	var seal []byte // the seal's hex digits in canon
	if key != nil {
		canon = model.AppendSeal(canon, key)
		seal = canon[len(canon)-2-2*sha256.Size : len(canon)-2]
	}
	return entry{canon, packAudit(b, seal, canon)}
}

// packedAudit starts a packed entry; a canonical one starts with '{'.
const packedAudit = 1

// packAudit is the stored form of the entry b, sealed with seal (b.Seal
// is not read; nil: unsealed), whose canonical bytes are canon: packed, a
// third of its JSON's size (the times, hashes and seal in binary, no
// field names), since every byte of a durable write is copied into the
// WAL, the memtable and each table compaction writes (at 64 concurrent
// writers the JSON entry cost 1.20× the write without it). An entry whose
// hashes are not lowercase hex is stored as canon.
// TestAuditPackingKnowsEveryField fails when AuditBody or Actor gains a
// field that packing would drop.
func packAudit(b model.AuditBody, seal, canon []byte) []byte {
	out := make([]byte, 0, len(canon)/2)
	out = append(out, packedAudit)
	out = binary.AppendVarint(out, b.At.UnixNano())
	for _, f := range [...]string{b.Task, b.Act, b.Actor.Name, b.Actor.Role, b.Actor.Host, b.Actor.Label, string(b.From), string(b.To)} {
		out = appendString(out, f)
	}
	var ok1, ok2 bool
	out, ok1 = appendRawHex(out, b.Record)
	out, ok2 = appendRawHex(out, seal)
	if !ok1 || !ok2 {
		return canon
	}
	out = binary.AppendUvarint(out, b.Prev)
	out = binary.AppendUvarint(out, uint64(len(b.Keys)))
	for _, k := range b.Keys {
		out = appendString(out, k)
	}
	return out
}

// appendRawHex appends the bytes that the lowercase hex s encodes, as
// appendString would append them; ok is false when s is not lowercase
// hex (which unpacking could not give back as it was).
func appendRawHex[T string | []byte](out []byte, s T) (_ []byte, ok bool) {
	if len(s)%2 != 0 {
		return out, false
	}
	out = binary.AppendUvarint(out, uint64(len(s)/2))
	for i := 0; i < len(s); i += 2 {
		hi, ok1 := lowerHex(s[i])
		lo, ok2 := lowerHex(s[i+1])
		if !ok1 || !ok2 {
			return out, false
		}
		out = append(out, hi<<4|lo)
	}
	return out, true
}

func lowerHex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

func appendString(out []byte, s string) []byte {
	return append(binary.AppendUvarint(out, uint64(len(s))), s...)
}

// errPacked: a packed entry cut short or malformed.
var errPacked = errors.New("malformed packed audit entry")

// unpackAudit gives the canonical bytes of a stored entry (after its
// hash); an entry stored canonical is returned as it is.
func unpackAudit(v []byte) ([]byte, error) {
	if len(v) == 0 || v[0] != packedAudit {
		return v, nil
	}
	v = v[1:]
	at, n := binary.Varint(v)
	if n <= 0 {
		return nil, errPacked
	}
	v = v[n:]
	var f [10]string
	for i := range f {
		var err error
		if f[i], v, err = readString(v); err != nil {
			return nil, err
		}
	}
	prev, n := binary.Uvarint(v)
	if n <= 0 {
		return nil, errPacked
	}
	v = v[n:]
	count, n := binary.Uvarint(v)
	if n <= 0 || count > uint64(len(v)) {
		return nil, errPacked
	}
	v = v[n:]
	var keys []string
	for range count {
		var k string
		var err error
		if k, v, err = readString(v); err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	if len(v) != 0 {
		return nil, errPacked
	}
	b := model.AuditBody{
		At: time.Unix(0, at).UTC(), Task: f[0], Act: f[1],
		Actor: model.Actor{Name: f[2], Role: f[3], Host: f[4], Label: f[5]},
		Keys:  keys, From: model.Status(f[6]), To: model.Status(f[7]),
		Record: hex.EncodeToString([]byte(f[8])), Prev: prev, Seal: hex.EncodeToString([]byte(f[9])),
	}
	return b.Marshal(), nil
}

func readString(v []byte) (string, []byte, error) {
	l, n := binary.Uvarint(v)
	if n <= 0 || l > uint64(len(v)-n) {
		return "", nil, errPacked
	}
	return string(v[n : n+int(l)]), v[n+int(l):], nil
}

// canonAudit is the canonical bytes of a stored entry. A packed entry
// that does not unpack is returned as stored: its hash then does not
// match, and the verification names it.
func canonAudit(stored []byte) []byte {
	body, err := unpackAudit(stored)
	if err != nil {
		return stored
	}
	return body
}

// SetAuditKey makes every audit entry written after it sealed with key
// (model.SealAudit). It must be called before the store is shared.
func (s *Store) SetAuditKey(key []byte) { s.auditKey = key }

// audit appends the entry e of the change at r.meta.rev to the txn's run,
// and chains it.
func (r *revisions) audit(txn *badger.Txn, e entry) error {
	if len(r.run) > 0 && r.runFrom+uint64(len(r.run)) != r.meta.rev {
		if err := r.writeRun(txn); err != nil { // not contiguous: never so today
			return err
		}
	}
	r.meta.audit = model.AppendChainHash(make([]byte, 0, sha256.Size), r.meta.audit, r.meta.rev, e.canon)
	if len(r.run) == 0 {
		r.runFrom, r.runBytes = r.meta.rev, 0
	}
	r.run = append(r.run, e.stored)
	r.runBytes += len(e.stored) + binary.MaxVarintLen32
	if r.entryKeys || r.runBytes >= maxRunBytes {
		return r.writeRun(txn)
	}
	return nil
}

// writeRun writes the run of entries appended since the last (see the
// layout above); the chain's head is the last one's hash.
func (r *revisions) writeRun(txn *badger.Txn) error {
	n := len(r.run)
	if n == 0 {
		return nil
	}
	last := r.runFrom + uint64(n) - 1
	v := make([]byte, 0, sha256.Size+r.runBytes)
	v = append(v, r.meta.audit...)
	k := revKey(auditPrefix, last)
	if n == 1 {
		v = append(v, r.run[0]...)
	} else {
		k = binary.BigEndian.AppendUint64(k, r.runFrom)
		for _, e := range r.run {
			v = append(binary.AppendUvarint(v, uint64(len(e))), e...)
		}
	}
	r.run = r.run[:0]
	return txn.Set(k, v)
}

// run is what one audit key holds: the stored entries first..last and
// the last one's hash.
type run struct {
	key         []byte
	first, last uint64
	hash        []byte
	entries     [][]byte
}

// readRun splits the audit key k and its value v into their run. A run
// whose entries do not split as its key says is read as one entry, its
// first, holding all their bytes: its hash then does not match, and the
// verification names it.
func readRun(k, v []byte) (run, error) {
	r := run{key: k}
	switch len(k) {
	case len(auditPrefix) + 8:
		r.last = binary.BigEndian.Uint64(k[len(auditPrefix):])
		r.first = r.last
	case len(auditPrefix) + 16:
		r.last = binary.BigEndian.Uint64(k[len(auditPrefix):])
		r.first = binary.BigEndian.Uint64(k[len(auditPrefix)+8:])
	default:
		return r, &store.DecodeError{Err: fmt.Errorf("malformed audit key %q", k)}
	}
	if len(v) < sha256.Size || r.first > r.last {
		return r, &store.DecodeError{Err: fmt.Errorf("audit entry %d is cut short", r.first)}
	}
	r.hash = v[:sha256.Size]
	rest := v[sha256.Size:]
	if r.first == r.last {
		r.entries = [][]byte{rest}
		return r, nil
	}
	for i := r.first; i <= r.last; i++ {
		l, n := binary.Uvarint(rest)
		if n <= 0 || l > uint64(len(rest)-n) || (i == r.last && l != uint64(len(rest)-n)) {
			r.last, r.entries = r.first, [][]byte{v[sha256.Size:]}
			return r, nil
		}
		r.entries = append(r.entries, rest[n:n+int(l)])
		rest = rest[n+int(l):]
	}
	return r, nil
}

// eachRun calls fn with each run, in revision order, from the one that
// holds revision from on.
func eachRun(txn *badger.Txn, from uint64, fn func(run) error) error {
	it := txn.NewIterator(badger.IteratorOptions{Prefix: auditPrefix})
	defer it.Close()
	for it.Seek(revKey(auditPrefix, from)); it.Valid(); it.Next() {
		v, err := it.Item().ValueCopy(nil)
		if err != nil {
			return err
		}
		r, err := readRun(it.Item().KeyCopy(nil), v)
		if err != nil {
			return err
		}
		if err := fn(r); err != nil {
			return err
		}
	}
	return nil
}

// lastRun reads the log's last run; found is false when it has none.
func lastRun(txn *badger.Txn) (r run, found bool, err error) {
	it := txn.NewIterator(badger.IteratorOptions{Prefix: auditPrefix, Reverse: true})
	defer it.Close()
	it.Seek(revKey(auditPrefix, 1<<64-1))
	if !it.Valid() {
		return r, false, nil
	}
	v, err := it.Item().ValueCopy(nil)
	if err != nil {
		return r, false, err
	}
	r, err = readRun(it.Item().KeyCopy(nil), v)
	return r, err == nil, err
}

// readAuditHead reads the chain's head: the last entry's hash, else the
// checkpoint's. found is false when the store has neither.
func readAuditHead(txn *badger.Txn) (head []byte, found bool, err error) {
	r, found, err := lastRun(txn)
	if err != nil || found {
		return r.hash, found, err
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
		r, ok, err := lastRun(txn)
		if err != nil || !ok {
			return err
		}
		rev, body, found = r.last, canonAudit(r.entries[len(r.entries)-1]), true
		return nil
	})
	return rev, body, found, s.damaged(err)
}

// AuditCheckpoint reads where the kept log starts (AuditTail).
func (s *Store) AuditCheckpoint() (cp model.AuditCheckpoint, err error) {
	err = s.view(func(txn *badger.Txn) error {
		cp, _, err = readCheckpoint(txn)
		return err
	})
	return cp, s.damaged(err)
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

// AuditLog calls fn with each audit entry kept after revision after, in
// revision order, read in one transaction, and returns the checkpoint the
// kept log starts after. The hash of an entry before the last of its run
// is recomputed from the hash before it (see the layout above): a read
// that starts inside a run starts from the run before it.
func (s *Store) AuditLog(after uint64, fn store.AuditFunc) (model.AuditCheckpoint, error) {
	var cp model.AuditCheckpoint
	err := s.view(func(txn *badger.Txn) error {
		var err error
		if cp, _, err = readCheckpoint(txn); err != nil {
			return err
		}
		from := max(after, cp.Rev) + 1
		var prev []byte
		started := false
		return eachRun(txn, from, func(r run) error {
			if !started { // the chain up to this run's first entry
				h, err := hashBefore(txn, cp, r.first)
				if err != nil {
					return err
				}
				prev, started = h, true
			}
			for i, stored := range r.entries {
				rev, body := r.first+uint64(i), canonAudit(stored)
				hash := r.hash
				if rev < r.last {
					hash = model.ChainHash(prev, rev, body)
				}
				if rev >= from {
					if err := fn(cp, rev, body, hash); err != nil {
						return err
					}
				}
				prev = hash
			}
			return nil
		})
	})
	return cp, s.damaged(err)
}

// hashBefore is the chain's hash before the run that starts at revision
// first: the hash of the run before it, or the checkpoint's when there is
// none.
func hashBefore(txn *badger.Txn, cp model.AuditCheckpoint, first uint64) ([]byte, error) {
	cpHash, _ := hex.DecodeString(cp.Hash) // readCheckpoint's hex
	if first <= cp.Rev+1 {
		return cpHash, nil
	}
	it := txn.NewIterator(badger.IteratorOptions{Prefix: auditPrefix, Reverse: true})
	defer it.Close()
	// Past every key of a run that ends at first-1 (one with two
	// revisions in its key too).
	it.Seek(binary.BigEndian.AppendUint64(revKey(auditPrefix, first-1), 1<<64-1))
	if !it.Valid() {
		return cpHash, nil
	}
	v, err := it.Item().ValueCopy(nil)
	if err != nil {
		return nil, err
	}
	r, err := readRun(it.Item().KeyCopy(nil), v)
	if err != nil || r.last <= cp.Rev {
		return cpHash, err
	}
	return r.hash, nil
}

// errPruned stops PruneAudit's walk at a run it keeps.
var errPruned = errors.New("the rest is kept")

// PruneAudit deletes the audit entries made before cutoff, oldest first
// up to the first run holding one made later, auditChunk runs per txn,
// and moves the checkpoint to the last one deleted, so that the rest
// still verifies. Records' entries go too: a record last changed before
// the checkpoint is no longer checked against its entry.
func (s *Store) PruneAudit(cutoff time.Time) (int, error) {
	total := 0
	for {
		var runs, entries int
		err := s.commit("", func(txn *badger.Txn, _ *revisions) error {
			runs, entries = 0, 0
			cp, _, err := readCheckpoint(txn)
			if err != nil {
				return err
			}
			var drop []run
			err = eachRun(txn, cp.Rev+1, func(r run) error {
				if len(drop) == auditChunk {
					return errPruned
				}
				for _, e := range r.entries {
					at, err := auditTime(e)
					if err != nil {
						return err
					}
					if !at.Before(cutoff) {
						return errPruned
					}
				}
				drop = append(drop, r)
				return nil
			})
			if err != nil && !errors.Is(err, errPruned) {
				return err
			}
			for _, r := range drop {
				if err := txn.Delete(r.key); err != nil {
					return err
				}
				entries += len(r.entries)
			}
			runs = len(drop)
			if runs == 0 {
				return nil
			}
			last := drop[runs-1]
			return txn.Set(checkpointKey, checkpointValue(last.last, last.hash))
		})
		if err != nil {
			return total, err
		}
		total += entries
		if runs < auditChunk {
			break
		}
	}
	if total > 0 {
		// As after Prune: the space is given back now, or at the next open.
		return total, s.reclaim()
	}
	return total, nil
}

// auditTime reads the time of a stored entry.
func auditTime(stored []byte) (time.Time, error) {
	e, err := store.DecodeAudit(0, canonAudit(stored), nil)
	return e.At, err
}
