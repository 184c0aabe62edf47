package postgres

import (
	"context"
	"encoding/hex"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store"
)

// SetAuditKey makes every audit entry written after it sealed with key
// (model.SealAudit). It must be called before the store is shared.
func (s *Store) SetAuditKey(key []byte) { s.auditKey = key }

// AuditLog calls fn with each audit entry kept after revision after, in
// revision order, read in one transaction, and returns the checkpoint the
// kept log starts after.
func (s *Store) AuditLog(after uint64, fn store.AuditFunc) (model.AuditCheckpoint, error) {
	var cp model.AuditCheckpoint
	err := s.readTx("read the audit log", func(ctx context.Context, tx pgx.Tx) error {
		var err error
		if cp, err = readCheckpoint(ctx, tx); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT rev, body, hash FROM taskdeck_audit WHERE rev > $1 ORDER BY rev`, int64(max(after, cp.Rev)))
		if err != nil {
			return err
		}
		defer rows.Close()
		var rev int64
		var body, hash []byte
		for rows.Next() {
			if err := rows.Scan(&rev, &body, &hash); err != nil {
				return err
			}
			if err := fn(cp, uint64(rev), body, hash); err != nil {
				return err
			}
		}
		return rows.Err()
	})
	return cp, err
}

// LastAudit reads the audit log's last entry (store.AuditTail).
func (s *Store) LastAudit() (rev uint64, body []byte, found bool, err error) {
	err = s.readTx("read the audit log", func(ctx context.Context, tx pgx.Tx) error {
		var r int64
		err := tx.QueryRow(ctx, `SELECT rev, body FROM taskdeck_audit ORDER BY rev DESC LIMIT 1`).Scan(&r, &body)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		rev, found = uint64(r), err == nil
		return err
	})
	return rev, body, found, err
}

// AuditCheckpoint reads where the kept log starts (store.AuditTail).
func (s *Store) AuditCheckpoint() (model.AuditCheckpoint, error) {
	var cp model.AuditCheckpoint
	err := s.readTx("read the audit log", func(ctx context.Context, tx pgx.Tx) (err error) {
		cp, err = readCheckpoint(ctx, tx)
		return err
	})
	return cp, err
}

func readCheckpoint(ctx context.Context, tx pgx.Tx) (model.AuditCheckpoint, error) {
	var rev int64
	var hash []byte
	err := tx.QueryRow(ctx, `SELECT audit_cp_rev, audit_cp_hash FROM taskdeck_meta`).Scan(&rev, &hash)
	return model.AuditCheckpoint{Rev: uint64(rev), Hash: hex.EncodeToString(hash)}, err
}

// PruneAudit deletes the audit entries made before cutoff, oldest first
// up to the first made later, and moves the checkpoint to the last one
// deleted, in one committed txn, so that the rest still verifies.
func (s *Store) PruneAudit(cutoff time.Time) (int, error) {
	ctx, cancel, err := s.ctx()
	if err != nil {
		return 0, err
	}
	defer cancel()
	var n int64
	err = s.inTx(ctx, pgx.TxOptions{}, func(tx pgx.Tx) error {
		n = 0
		err := tx.QueryRow(ctx, `WITH keep AS (
				SELECT min(rev) AS r FROM taskdeck_audit WHERE at >= $1),
			gone AS (
				DELETE FROM taskdeck_audit WHERE rev < coalesce((SELECT r FROM keep), (SELECT max(rev) + 1 FROM taskdeck_audit)) RETURNING rev, hash),
			last AS (
				SELECT rev, hash FROM gone ORDER BY rev DESC LIMIT 1),
			cp AS (
				UPDATE taskdeck_meta SET audit_cp_rev = last.rev, audit_cp_hash = last.hash FROM last RETURNING 1)
			SELECT count(*) FROM gone`, cutoff).Scan(&n)
		return err
	})
	if err != nil {
		return 0, dbError("prune the audit log", err)
	}
	return int(n), nil
}
