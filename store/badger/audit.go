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
// its entry under a\x00<rev> in the same txn: the 32-byte hash, then the
// entry's canonical bytes (model.AuditBody) as written, or packed (see
// packAudit). The chain's head, the last entry's hash, is in revMeta, so
// the group's leader chains each entry as it hands out its revision. A
// pruned log starts after the checkpoint (p\x00: the revision and hash of
// the last entry pruned).
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

// auditEntry is the audit entry of a write of t (as base) over prev,
// made before the commit: the group's leader, which runs every change of
// a group one after the other, then only chains it.
func (s *Store) auditEntry(prev, t *model.Task, base []byte) entry {
	return sealEntry(s.auditKey, model.NewAuditBody(prev, t, base, t.Act, time.Now()), s.canonAudit)
}

// entry is an audit entry: its canonical bytes, which the chain hashes,
// and the form it is stored in.
type entry struct{ canon, stored []byte }

// sealEntry seals b with key (model.SealAudit) and packs it, unless
// canonical. Its canonical bytes are made in one buffer and sealed in
// place.
func sealEntry(key []byte, b model.AuditBody, canonical bool) entry {
	canon := b.AppendJSON(make([]byte, 0, 384))
	var seal []byte // the seal's hex digits in canon
	if key != nil {
		canon = model.AppendSeal(canon, key)
		seal = canon[len(canon)-2-2*sha256.Size : len(canon)-2]
	}
	if canonical {
		return entry{canon, canon}
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

// storedAudit splits a stored entry into its hash and canonical bytes. A
// packed entry that does not unpack is returned as stored: its hash then
// does not match, and the verification names it.
func storedAudit(v []byte) (hash, body []byte) {
	if len(v) < 32 {
		return nil, v
	}
	body, err := unpackAudit(v[32:])
	if err != nil {
		body = v[32:]
	}
	return v[:32], body
}

// SetAuditKey makes every audit entry written after it sealed with key
// (model.SealAudit). It must be called before the store is shared.
func (s *Store) SetAuditKey(key []byte) { s.auditKey = key }

// audit appends the entry e of the change at r.meta.rev.
func (r *revisions) audit(txn *badger.Txn, e entry) error {
	v := model.AppendChainHash(make([]byte, 0, sha256.Size+len(e.stored)), r.meta.audit, r.meta.rev, e.canon)
	r.meta.audit = v[:sha256.Size:sha256.Size]
	return txn.Set(revKey(auditPrefix, r.meta.rev), append(v, e.stored...))
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
		rev, found = binary.BigEndian.Uint64(k[len(auditPrefix):]), true
		_, body = storedAudit(v)
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
				hash, body := storedAudit(v)
				return fn(cp, rev, body, hash)
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
	hash, body := storedAudit(v)
	e, err := store.DecodeAudit(0, body, hash)
	return e.At, err
}
