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
