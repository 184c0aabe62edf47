package deck

import (
	"context"
	"time"

	"github.com/taskdeck/taskdeck/model"
)

// Auditor reads and keeps the audit log, where every change to a record
// is an entry naming its act and actor, chained by hash. Every Deck is
// one.
type Auditor interface {
	// Audit returns the entries the filter admits, in revision order.
	Audit(ctx context.Context, f model.AuditFilter) (AuditLog, error)
	// VerifyAudit recomputes the chain from its checkpoint and checks each
	// live record against the entry of its last change; a mismatch is the
	// report's Fault.
	VerifyAudit(ctx context.Context) (model.AuditReport, error)
	// PruneAudit deletes the entries made before a time, leaving a
	// checkpoint so that the rest still verifies.
	PruneAudit(ctx context.Context, before time.Time) (int, error)
}

// AuditLog is a read of the audit log.
type AuditLog struct {
	// Checkpoint is where the kept log starts (after a prune).
	Checkpoint model.AuditCheckpoint `json:"checkpoint"`
	Entries    []model.AuditEntry    `json:"entries"`
}
