package postgres

import (
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/taskdeck/taskdeck/model"
)

// ErrClaimLost refuses a write of a poll result by an engine whose claim
// on the task has expired or been taken by another engine.
var ErrClaimLost = errors.New("this engine's claim on the task was lost (its lease ran out); another engine polls it now, and nothing was written")

// Claim is an engine's lease on polling one task. Fence grows with every
// claim of the task, so a write carrying an older one is refused.
type Claim struct {
	ID    string
	Owner string
	Fence uint64
}

func (c *Claim) fence() *int64 {
	if c == nil {
		return nil
	}
	f := int64(c.Fence)
	return &f
}

func (c *Claim) owner() *string {
	if c == nil {
		return nil
	}
	return &c.Owner
}

// ClaimTasks claims up to limit open tasks of the given servers that no
// engine holds (never claimed, or their lease ran out) for engine, until
// lease from now, in one txn: rows other engines are claiming at that
// moment are skipped (FOR UPDATE SKIP LOCKED), so no task is claimed by
// two. A claim changes no record and no revision. Orphaned records are
// not claimed: they wait for the operator, with nothing to poll.
func (s *Store) ClaimTasks(engine string, servers []string, limit int, lease time.Duration) ([]Claim, error) {
	var open []string
	for _, st := range model.AllStatuses {
		if !st.Terminal() && st != model.StatusOrphaned {
			open = append(open, string(st))
		}
	}
	ctx, cancel, err := s.ctx()
	if err != nil {
		return nil, err
	}
	defer cancel()
	var out []Claim
	err = s.inTx(ctx, pgx.TxOptions{}, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `UPDATE taskdeck_tasks t
			SET owner = $1, lease_until = now() + $2::interval, fence = t.fence + 1
			FROM (SELECT id FROM taskdeck_tasks
				WHERE status = ANY($3) AND server = ANY($4) AND (lease_until IS NULL OR lease_until < now())
				ORDER BY id LIMIT $5 FOR UPDATE SKIP LOCKED) c
			WHERE t.id = c.id RETURNING t.id, t.fence`, engine, lease, open, servers, limit)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (Claim, error) {
			c := Claim{Owner: engine}
			var f int64
			err := row.Scan(&c.ID, &f)
			c.Fence = uint64(f)
			return c, err
		})
		return err
	})
	if err != nil {
		return nil, dbError("claim tasks", err)
	}
	return out, nil
}

// RenewClaims extends, in one write, the leases of the claims that still
// hold to lease from now, and returns those; the others are lost.
func (s *Store) RenewClaims(claims []Claim, lease time.Duration) ([]Claim, error) {
	if len(claims) == 0 {
		return nil, nil
	}
	ids := make([]string, len(claims))
	fences := make([]int64, len(claims))
	for i, c := range claims {
		ids[i], fences[i] = c.ID, int64(c.Fence)
	}
	ctx, cancel, err := s.ctx()
	if err != nil {
		return nil, err
	}
	defer cancel()
	var kept []string
	err = s.inTx(ctx, pgx.TxOptions{}, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `UPDATE taskdeck_tasks t SET lease_until = now() + $2::interval
			FROM unnest($3::text[], $4::bigint[]) AS c(id, fence)
			WHERE t.id = c.id AND t.fence = c.fence AND t.owner = $1 AND t.lease_until >= now()
			RETURNING t.id`, claims[0].Owner, lease, ids, fences)
		if err != nil {
			return err
		}
		kept, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	if err != nil {
		return nil, dbError("renew claims", err)
	}
	held := make(map[string]bool, len(kept))
	for _, id := range kept {
		held[id] = true
	}
	var out []Claim
	for _, c := range claims {
		if held[c.ID] {
			out = append(out, c)
		}
	}
	return out, nil
}

// UpdateClaimed is Update for the engine that holds claim c: the write is
// refused with ErrClaimLost once the claim no longer holds. An unchanged
// poll still writes nothing.
func (s *Store) UpdateClaimed(c Claim, fn func(t *model.Task) (changed bool, err error)) (*model.Task, error) {
	return s.update(c.ID, fn, false, &c)
}

// checkClaim says whether claim c on task id still holds.
func (s *Store) checkClaim(id string, c *Claim) error {
	ctx, cancel, err := s.ctx()
	if err != nil {
		return err
	}
	defer cancel()
	var holds bool
	err = s.reread(func() error {
		return s.pool.QueryRow(ctx, `SELECT fence = $2 AND owner IS NOT DISTINCT FROM $3 AND lease_until >= now()
			FROM taskdeck_tasks WHERE id = $1`, id, int64(c.Fence), c.Owner).Scan(&holds)
	})
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("task %s: %w", id, ErrClaimLost)
	case err != nil:
		return dbError("check a claim", err)
	case !holds:
		return fmt.Errorf("task %s: %w", id, ErrClaimLost)
	}
	return nil
}
