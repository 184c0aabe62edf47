package engine

import (
	"context"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store"
)

var _ deck.Auditor = (*Engine)(nil)

// Audit implements deck.Auditor.
func (e *Engine) Audit(ctx context.Context, f model.AuditFilter) (deck.AuditLog, error) {
	_, done, err := e.begin(ctx)
	if err != nil {
		return deck.AuditLog{}, err
	}
	defer done()
	entries, cp, err := store.ReadAudit(e.store, f)
	return deck.AuditLog{Checkpoint: cp, Entries: entries}, classify(err, "")
}

// VerifyAudit implements deck.Auditor.
func (e *Engine) VerifyAudit(ctx context.Context) (model.AuditReport, error) {
	_, done, err := e.begin(ctx)
	if err != nil {
		return model.AuditReport{}, err
	}
	defer done()
	rep, err := store.VerifyAudit(e.store, e.auditKey)
	return rep, classify(err, "")
}

// PruneAudit implements deck.Auditor: only a user or an operator may
// shorten the log.
func (e *Engine) PruneAudit(ctx context.Context, before time.Time) (int, error) {
	ctx, done, err := e.begin(ctx)
	if err != nil {
		return 0, err
	}
	defer done()
	if a := actorOf(ctx); a.Role != model.RoleUser && a.Role != model.RoleOperator {
		return 0, deck.Errorf(deck.KindUsage, "%s %s may not prune the audit log; a user or an operator may", a.Role, a.Name)
	}
	n, err := e.store.PruneAudit(before)
	return n, classify(err, "")
}

// AuditKey is the key that seals this engine's audit log
// (store.LoadAuditKey); nil on a fleet without one.
func (e *Engine) AuditKey() []byte { return e.auditKey }

// CheckAuditKey compares the audit key with the seal of the log's last
// entry. Every engine of a fleet must seal with the same key: entries
// sealed with another, or none, would make `audit verify` name the first
// of them as rewritten. A sealed log this key did not seal, or a sealed
// log and no key, is a usage error that says which key to set.
func (e *Engine) CheckAuditKey() error {
	if e.auditTail == nil {
		return nil
	}
	rev, body, found, err := e.auditTail.LastAudit()
	if err != nil || !found || !model.HasSeal(body) {
		return classify(err, "")
	}
	switch {
	case e.auditKey == nil:
		return deck.Errorf(deck.KindUsage, "the audit log is sealed (its last entry, %d) and $%s is not set: set it to the key the fleet's other hosts use", rev, store.AuditKeyEnv)
	case !model.SealedBy(e.auditKey, body):
		return deck.Errorf(deck.KindUsage, "the audit key is not the one that sealed the audit log's last entry (%d): give every host of a fleet the same $%s; if they have it, `taskdeck audit verify` says whether the entry was rewritten", rev, store.AuditKeyEnv)
	}
	return nil
}
