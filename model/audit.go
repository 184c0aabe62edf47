package model

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// AuditEntry is one act or transition in the audit log: every committed
// change to a record has one, at the change's revision. Hash chains it to
// the entry before (see ChainHash), so that an entry or record rewritten
// behind taskdeck's back no longer verifies.
type AuditEntry struct {
	Rev uint64 `json:"rev"`
	AuditBody
	Hash string `json:"hash"` // hex SHA-256, see ChainHash
}

// AuditBody is what an entry says; its JSON is the entry's canonical
// bytes, written once and hashed as written.
type AuditBody struct {
	At    time.Time `json:"at"`
	Task  string    `json:"task"`
	Act   string    `json:"act"`
	Actor Actor     `json:"actor"`
	Keys  []string  `json:"keys,omitempty"` // an answer's input keys
	From  Status    `json:"from,omitempty"`
	To    Status    `json:"to,omitempty"`
	// Record is the hex SHA-256 of the record as written (RecordHash);
	// empty for a deletion.
	Record string `json:"record,omitempty"`
	// Prev is the revision of the record this write replaced (0: a new
	// record): under the seal, it ties each write to the one before it,
	// so that an entry sealed once cannot be replayed elsewhere.
	Prev uint64 `json:"prev,omitempty"`
	// Seal is the hex HMAC-SHA256, under the audit key, of the entry's
	// bytes before it (see SealAudit); empty in a log kept without a key.
	Seal string `json:"seal,omitempty"`
}

// AuditCheckpoint is where the kept log starts: the revision and hash of
// the last entry pruned (zero for a log that was never pruned).
type AuditCheckpoint struct {
	Rev  uint64 `json:"rev"`
	Hash string `json:"hash,omitempty"`
}

// NewAuditBody describes the change from prev (nil: a new record) to next
// (nil: deleted) by act, at now; nextJSON is next as the store writes it
// (its JSON without the revision).
func NewAuditBody(prev, next *Task, nextJSON []byte, act *Act, now time.Time) AuditBody {
	b := AuditBody{At: now.UTC()}
	if act != nil {
		b.Act, b.Actor, b.Keys = act.Kind, act.Actor, act.Keys
	}
	if prev != nil {
		b.Task, b.From = prev.ID, prev.Status
	}
	if next != nil {
		sum := sha256.Sum256(nextJSON)
		b.Task, b.To, b.Record = next.ID, next.Status, hex.EncodeToString(sum[:])
		if prev != nil {
			b.Prev = prev.Revision
		}
	}
	return b
}

// RemovalAudit describes the deletion of record id by act, at now.
func RemovalAudit(id string, act *Act, now time.Time) AuditBody {
	return AuditBody{At: now.UTC(), Task: id, Act: act.Kind, Actor: act.Actor}
}

// Marshal is the body's canonical bytes.
func (b AuditBody) Marshal() []byte { return b.AppendJSON(nil) }

// AppendJSON appends the body's canonical bytes, exactly what
// json.Marshal gives for it (TestAuditAppendMatchesJSON), without
// reflection: every durable write seals one entry, and json.Marshal's
// took about as long as marshalling the record itself.
func (b AuditBody) AppendJSON(dst []byte) []byte {
	dst = append(dst, `{"at":"`...)
	dst = b.At.AppendFormat(dst, time.RFC3339Nano)
	dst = append(dst, `","task":`...)
	dst = appendJSONString(dst, b.Task)
	dst = append(dst, `,"act":`...)
	dst = appendJSONString(dst, b.Act)
	dst = append(dst, `,"actor":{"name":`...)
	dst = appendJSONString(dst, b.Actor.Name)
	dst = append(dst, `,"role":`...)
	dst = appendJSONString(dst, b.Actor.Role)
	dst = appendJSONField(dst, `,"host":`, b.Actor.Host)
	dst = appendJSONField(dst, `,"label":`, b.Actor.Label)
	dst = append(dst, '}')
	if len(b.Keys) > 0 {
		dst = append(dst, `,"keys":[`...)
		for i, k := range b.Keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSONString(dst, k)
		}
		dst = append(dst, ']')
	}
	dst = appendJSONField(dst, `,"from":`, string(b.From))
	dst = appendJSONField(dst, `,"to":`, string(b.To))
	dst = appendJSONField(dst, `,"record":`, b.Record)
	if b.Prev != 0 {
		dst = strconv.AppendUint(append(dst, `,"prev":`...), b.Prev, 10)
	}
	dst = appendJSONField(dst, `,"seal":`, b.Seal)
	return append(dst, '}')
}

// appendJSONField appends an omitempty string member.
func appendJSONField(dst []byte, name, s string) []byte {
	if s == "" {
		return dst
	}
	return appendJSONString(append(dst, name...), s)
}

// appendJSONString appends s as encoding/json quotes it: printable ASCII
// other than the characters it escapes is copied, anything else is left
// to encoding/json.
func appendJSONString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always marshals
			return append(dst, q...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

// sealField ends a sealed entry: the seal is its last member, so that
// the bytes it seals are the entry's bytes before it, exactly as written.
const sealField = `,"seal":"`

// SealAudit seals an entry's canonical bytes (Marshal, without a seal)
// with key: the HMAC-SHA256 of those bytes becomes their last member.
// Whoever can write the store but does not hold the key can rewrite the
// SHA-256 chain, not the seals. A nil key leaves body as it is.
func SealAudit(key, body []byte) []byte {
	if key == nil {
		return body
	}
	return AppendSeal(bytes.Clone(body), key)
}

// AppendSeal is SealAudit in place: body's closing brace becomes the
// seal member, in body's spare capacity when it has enough.
func AppendSeal(body, key []byte) []byte {
	mac := hmac.New(sha256.New, key)
	mac.Write(body)
	var sum [sha256.Size]byte
	out := append(body[:len(body)-1], sealField...)
	out = hex.AppendEncode(out, mac.Sum(sum[:0]))
	return append(out, '"', '}')
}

// sealTail is the length of a seal at the end of an entry.
const sealTail = len(sealField) + 2*sha256.Size + 2

// sealed checks the seal of body under key.
func sealed(key, body []byte) bool {
	if !HasSeal(body) {
		return false
	}
	return hmac.Equal(SealAudit(key, append(bytes.Clone(body[:len(body)-sealTail]), '}')), body)
}

// HasSeal tells whether an entry's canonical bytes end in a seal.
func HasSeal(body []byte) bool {
	return len(body) >= sealTail && bytes.HasPrefix(body[len(body)-sealTail:], []byte(sealField))
}

// SealedBy tells whether key made the seal of an entry's canonical bytes.
func SealedBy(key, body []byte) bool { return key != nil && sealed(key, body) }

// RecordHash fingerprints a record as the store keeps it: its JSON without
// the revision (which the store adds).
func RecordHash(t *Task) (string, error) {
	c := *t
	c.Revision = 0
	b, err := json.Marshal(&c)
	if err != nil {
		return "", fmt.Errorf("task %s: %w", t.ID, err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// ChainHash is the hash of the entry at rev with canonical bytes body,
// after the entry whose hash is prev (empty before the first): SHA-256 of
// prev's bytes, rev as 8 big-endian bytes, and body.
func ChainHash(prev []byte, rev uint64, body []byte) []byte {
	return AppendChainHash(nil, prev, rev, body)
}

// AppendChainHash appends ChainHash(prev, rev, body) to dst.
func AppendChainHash(dst, prev []byte, rev uint64, body []byte) []byte {
	h := sha256.New()
	h.Write(prev)
	var r [8]byte
	binary.BigEndian.PutUint64(r[:], rev)
	h.Write(r[:])
	h.Write(body)
	return h.Sum(dst)
}

// AuditFilter selects audit entries: those made at or after Since (zero:
// all) of task Task (every task when empty), after revision After, at
// most Limit of them (0: every one). A reader pages through the log with
// Limit and the revision of the last entry it was given as After.
type AuditFilter struct {
	Since time.Time `json:"since,omitzero"`
	Task  string    `json:"task,omitempty"`
	After uint64    `json:"after,omitempty"`
	Limit int       `json:"limit,omitempty"`
}

// AuditReport is what a verification of the audit log checked.
type AuditReport struct {
	// Keyed: every entry's seal was checked under the audit key; without
	// a key only the SHA-256 chain was, which whoever can write the store
	// can recompute.
	Keyed      bool            `json:"keyed"`
	Checkpoint AuditCheckpoint `json:"checkpoint"`
	Entries    int             `json:"entries"` // entries whose hash was recomputed
	Last       uint64          `json:"last"`    // the revision of the last entry checked
	Records    int             `json:"records"` // live records checked against their entries
	// Fault is the first entry or record that does not match; nil when
	// the log and the records verify.
	Fault *AuditFault `json:"fault,omitempty"`
}

// AuditFault is the first place where the log and the records stop
// matching what taskdeck wrote.
type AuditFault struct {
	Rev    uint64 `json:"rev"` // the entry (or the record's revision)
	Task   string `json:"task,omitempty"`
	Reason string `json:"reason"`
}

func (f *AuditFault) Error() string {
	if f.Task != "" {
		return fmt.Sprintf("audit entry %d (task %s): %s", f.Rev, f.Task, f.Reason)
	}
	return fmt.Sprintf("audit entry %d: %s", f.Rev, f.Reason)
}

// AuditVerifier recomputes the chain one entry at a time, in revision
// order from the checkpoint, and remembers each record's fingerprint.
type AuditVerifier struct {
	key     []byte // nil: the seals are not checked
	floor   uint64 // the checkpoint's revision
	prev    []byte
	rev     uint64
	records map[uint64]AuditBody // by revision, the entries that wrote a record
	last    map[string]uint64    // by task, the revision of its last entry (0 after a removal)
	Entries int
}

// NewAuditVerifier starts at checkpoint cp; with a key, it checks every
// entry's seal under it too.
func NewAuditVerifier(cp AuditCheckpoint, key []byte) (*AuditVerifier, *AuditFault) {
	prev, err := hex.DecodeString(cp.Hash)
	if err != nil {
		return nil, &AuditFault{Rev: cp.Rev, Reason: "the checkpoint's hash is not hex"}
	}
	return &AuditVerifier{key: key, floor: cp.Rev, prev: prev, rev: cp.Rev, records: map[uint64]AuditBody{}, last: map[string]uint64{}}, nil
}

// Next checks the entry at rev with canonical bytes body and stored hash.
func (v *AuditVerifier) Next(rev uint64, body []byte, hash []byte) *AuditFault {
	var b AuditBody
	_ = json.Unmarshal(body, &b) // for naming the task; a bad body fails below
	if rev != v.rev+1 {
		return &AuditFault{Rev: v.rev + 1, Reason: fmt.Sprintf("missing: the log goes on at entry %d", rev)}
	}
	if want := ChainHash(v.prev, rev, body); !bytes.Equal(want, hash) {
		return &AuditFault{Rev: rev, Task: b.Task, Reason: "its hash does not match its content and the entry before it (this entry, or the one before, was rewritten)"}
	}
	if v.key != nil {
		if !sealed(v.key, body) {
			return &AuditFault{Rev: rev, Task: b.Task, Reason: "its seal does not match its content under the audit key (the entry was rewritten, or made without the key)"}
		}
		if f := v.follows(rev, b); f != nil {
			return f
		}
	}
	v.prev, v.rev = hash, rev
	v.Entries++
	if b.Record != "" {
		v.records[rev] = b
		v.last[b.Task] = rev
	} else {
		v.last[b.Task] = 0
	}
	return nil
}

// follows checks that a sealed write names as the record it replaced
// the task's last entry: a sealed entry copied to another place in the
// log (a record rolled back with its old entry) does not.
func (v *AuditVerifier) follows(rev uint64, b AuditBody) *AuditFault {
	if b.Record == "" {
		return nil
	}
	last, seen := v.last[b.Task]
	switch {
	case seen && b.Prev != last, !seen && b.Prev > v.floor:
		return &AuditFault{Rev: rev, Task: b.Task, Reason: fmt.Sprintf("it says it replaced the record written at revision %d, which is not the task's last entry before it (an entry was moved, replayed or removed)", b.Prev)}
	}
	return nil
}

// Records checks each live record against the entry of its last change:
// one the log has not pruned must be there and name the same fingerprint.
func (v *AuditVerifier) Records(floor uint64, tasks []*Task) *AuditFault {
	for _, t := range tasks {
		if t.Revision <= floor {
			continue // written before the kept log begins
		}
		b, ok := v.records[t.Revision]
		if !ok || b.Task != t.ID {
			return &AuditFault{Rev: t.Revision, Task: t.ID, Reason: "the record's last change has no audit entry (the record was rewritten)"}
		}
		if h, err := RecordHash(t); err != nil || h != b.Record {
			return &AuditFault{Rev: t.Revision, Task: t.ID, Reason: "the record does not match what its audit entry says was written (the record was rewritten)"}
		}
	}
	return nil
}

// Last is the revision of the last entry checked.
func (v *AuditVerifier) Last() uint64 { return v.rev }
