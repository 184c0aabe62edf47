package store

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/taskdeck/taskdeck/model"
)

// AuditFunc receives one stored audit entry: the checkpoint the kept log
// starts after, the entry's revision, canonical bytes and hash (valid
// only during the call).
type AuditFunc func(cp model.AuditCheckpoint, rev uint64, body, hash []byte) error

// DecodeAudit decodes a stored audit entry.
func DecodeAudit(rev uint64, body, hash []byte) (model.AuditEntry, error) {
	e := model.AuditEntry{Rev: rev, Hash: hex.EncodeToString(hash)}
	if err := json.Unmarshal(body, &e.AuditBody); err != nil {
		return e, &DecodeError{Err: fmt.Errorf("audit entry %d does not decode: %w", rev, err)}
	}
	return e, nil
}

// ReadAudit returns the entries f admits, in revision order, and the
// checkpoint the kept log starts after.
func ReadAudit(b Backend, f model.AuditFilter) ([]model.AuditEntry, model.AuditCheckpoint, error) {
	var out []model.AuditEntry
	cp, err := b.AuditLog(f.After, func(_ model.AuditCheckpoint, rev uint64, body, hash []byte) error {
		e, err := DecodeAudit(rev, body, hash)
		if err != nil {
			return err
		}
		if (f.Task == "" || e.Task == f.Task) && !e.At.Before(f.Since) {
			out = append(out, e)
		}
		if f.Limit > 0 && len(out) == f.Limit {
			return errEnoughAudit
		}
		return nil
	})
	if errors.Is(err, errEnoughAudit) {
		err = nil
	}
	return out, cp, err
}

// errEnoughAudit ends a read of the log once the filter's Limit is met.
var errEnoughAudit = errors.New("enough audit entries")

// VerifyAudit recomputes the audit chain of b from its checkpoint and
// checks every live record against the entry of its last change; with a
// key, every entry's seal under it too. A mismatch is the report's
// Fault; err is a failure to read.
func VerifyAudit(b Backend, key []byte) (model.AuditReport, error) {
	// The records first: every change they carry is in the log read after.
	_, tasks, err := b.Snapshot()
	if err != nil {
		return model.AuditReport{}, err
	}
	rep := model.AuditReport{Records: len(tasks), Keyed: key != nil}
	var v *model.AuditVerifier
	start := func(cp model.AuditCheckpoint) bool {
		if v == nil && rep.Fault == nil {
			v, rep.Fault = model.NewAuditVerifier(cp, key)
		}
		return rep.Fault == nil
	}
	cp, err := b.AuditLog(0, func(cp model.AuditCheckpoint, rev uint64, body, hash []byte) error {
		if start(cp) {
			rep.Fault = v.Next(rev, body, hash)
		}
		return nil
	})
	if err != nil {
		return model.AuditReport{}, err
	}
	rep.Checkpoint = cp
	if start(cp) {
		rep.Fault = v.Records(cp.Rev, tasks)
	}
	if v != nil {
		rep.Entries, rep.Last = v.Entries, v.Last()
	}
	return rep, nil
}
