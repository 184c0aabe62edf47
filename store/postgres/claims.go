package postgres

import (
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store"
)

// Claim and Fleet are the shared store's (store.Claim, store.Fleet).
type (
	Claim = store.Claim
	Fleet = store.Fleet
)

// fenceOf is c's fence as a parameter (NULL: no claim).
func fenceOf(c *Claim) *int64 {
	if c == nil {
		return nil
	}
	f := int64(c.Fence)
	return &f
}

// ownerOf is c's owner as a parameter (NULL: no claim).
func ownerOf(c *Claim) *string {
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
	return s.claimTasks(engine, servers, limit, lease, `lease_until IS NULL OR lease_until < now()`)
}

// ClaimExpired is ClaimTasks of only the tasks whose claim ran out: their
// engine died or stalled, and they have no one to watch them.
func (s *Store) ClaimExpired(engine string, servers []string, limit int, lease time.Duration) ([]Claim, error) {
	return s.claimTasks(engine, servers, limit, lease, `lease_until < now()`)
}

// claimTasks claims the open tasks of servers that claimable admits.
func (s *Store) claimTasks(engine string, servers []string, limit int, lease time.Duration, claimable string) ([]Claim, error) {
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
				WHERE status = ANY($3) AND server = ANY($4) AND (`+claimable+`)
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
// refused with store.ErrFenced once the claim no longer holds. An unchanged
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
		return s.pool.QueryRow(ctx, `SELECT taskdeck_holds(fence, owner, lease_until, $2, $3) FROM taskdeck_tasks WHERE id = $1`,
			id, int64(c.Fence), c.Owner).Scan(&holds)
	})
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("task %s: %w", id, store.ErrFenced)
	case err != nil:
		return dbError("check a claim", err)
	case !holds:
		return fmt.Errorf("task %s: %w", id, store.ErrFenced)
	}
	return nil
}

// Heartbeat records engine as alive until lease from now, able to poll
// servers, and forgets the engines whose time ran out: one write.
func (s *Store) Heartbeat(engine string, servers []string, lease time.Duration) error {
	ctx, cancel, err := s.ctx()
	if err != nil {
		return err
	}
	defer cancel()
	err = s.inTx(ctx, pgx.TxOptions{}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO taskdeck_engines (name, servers, alive_until)
			VALUES ($1, $2, now() + $3::interval)
			ON CONFLICT (name) DO UPDATE SET servers = EXCLUDED.servers, alive_until = EXCLUDED.alive_until`,
			engine, servers, lease); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `DELETE FROM taskdeck_engines WHERE alive_until < now()`)
		return err
	})
	if err != nil {
		return dbError("record this engine as alive", err)
	}
	return nil
}

// Leave takes engine off the live ones: it is closing.
func (s *Store) Leave(engine string) error {
	ctx, cancel, err := s.ctx()
	if err != nil {
		return err
	}
	defer cancel()
	if _, err = s.pool.Exec(ctx, `DELETE FROM taskdeck_engines WHERE name = $1`, engine); err != nil {
		return dbError("take this engine off the live ones", err)
	}
	return nil
}

// Fleet reads the fleet as engine me sees it; servers are those it claims.
func (s *Store) Fleet(me string, servers []string) (Fleet, error) {
	var open []string
	for _, st := range model.AllStatuses {
		if !st.Terminal() {
			open = append(open, string(st))
		}
	}
	ctx, cancel, err := s.ctx()
	if err != nil {
		return Fleet{}, err
	}
	defer cancel()
	mine := make(map[string]bool, len(servers))
	for _, name := range servers {
		mine[name] = true
	}
	f := Fleet{Watchers: map[string]string{}, Reachable: map[string]bool{}, Alive: map[string]bool{}}
	err = s.reread(func() error {
		clear(f.Watchers)
		f.NextExpiry = time.Time{}
		// The time left on each lease, by the database's clock, is put on
		// this host's: the two clocks may differ.
		asked := time.Now()
		rows, err := s.pool.Query(ctx, `SELECT id, owner, extract(epoch FROM lease_until - now())::float8, server
			FROM taskdeck_tasks WHERE owner IS NOT NULL AND lease_until >= now() AND status = ANY($1)`, open)
		if err != nil {
			return err
		}
		var id, owner, server string
		var left float64
		_, err = pgx.ForEachRow(rows, []any{&id, &owner, &left, &server}, func() error {
			f.Watchers[id] = owner
			until := asked.Add(time.Duration(left * float64(time.Second)))
			if owner != me && mine[server] && (f.NextExpiry.IsZero() || until.Before(f.NextExpiry)) {
				f.NextExpiry = until
			}
			return nil
		})
		return err
	})
	if err == nil {
		err = s.reread(func() error {
			clear(f.Reachable)
			clear(f.Alive)
			rows, err := s.pool.Query(ctx, `SELECT name, servers FROM taskdeck_engines WHERE alive_until >= now()`)
			if err != nil {
				return err
			}
			var name string
			var servers []string
			_, err = pgx.ForEachRow(rows, []any{&name, &servers}, func() error {
				f.Alive[name] = true
				for _, server := range servers {
					f.Reachable[server] = true
				}
				return nil
			})
			return err
		})
	}
	if err != nil {
		return Fleet{}, dbError("read the fleet's claims", err)
	}
	return f, nil
}

// Watcher names the engine holding a live claim on task id ("" if none).
func (s *Store) Watcher(id string) (string, error) {
	ctx, cancel, err := s.ctx()
	if err != nil {
		return "", err
	}
	defer cancel()
	var owner *string
	err = s.reread(func() error {
		return s.pool.QueryRow(ctx, `SELECT owner FROM taskdeck_tasks WHERE id = $1 AND lease_until >= now()`, id).Scan(&owner)
	})
	switch {
	case errors.Is(err, pgx.ErrNoRows), err == nil && owner == nil:
		return "", nil
	case err != nil:
		return "", dbError("read a task's claim", err)
	}
	return *owner, nil
}

// Tasks reads the records of ids in one query (a claim round's new
// claims); a forgotten one is left out.
func (s *Store) Tasks(ids []string) ([]*model.Task, error) {
	return s.read(`WHERE id = ANY($1)`, ids)
}

// Ages tells, for each of ids, how long ago its record was last written,
// by the database's clock: one clock for every engine, whatever the
// timestamps the writer's clock put in the record. A forgotten one is
// left out.
func (s *Store) Ages(ids []string) (map[string]time.Duration, error) {
	ctx, cancel, err := s.ctx()
	if err != nil {
		return nil, err
	}
	defer cancel()
	out := make(map[string]time.Duration, len(ids))
	err = s.reread(func() error {
		clear(out)
		rows, err := s.pool.Query(ctx, `SELECT id, extract(epoch FROM now() - written_at)::float8 FROM taskdeck_tasks WHERE id = ANY($1)`, ids)
		if err != nil {
			return err
		}
		var id string
		var age float64
		_, err = pgx.ForEachRow(rows, []any{&id, &age}, func() error {
			out[id] = time.Duration(age * float64(time.Second))
			return nil
		})
		return err
	})
	if err != nil {
		return nil, dbError("read the records' ages", err)
	}
	return out, nil
}
