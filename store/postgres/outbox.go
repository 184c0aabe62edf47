package postgres

import (
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/taskdeck/taskdeck/store"
)

var _ store.Outbox = (*Store)(nil)

// eventArgs are an event's parameters (all nil without one). Endpoint
// names are hex with a letter before (config.Webhook.Endpoint): no comma.
func eventArgs(ev *store.Event) (id, endpoints *string, body []byte) {
	if ev == nil || len(ev.Endpoints) == 0 {
		return nil, nil, nil
	}
	eps := strings.Join(ev.Endpoints, ",")
	return &ev.ID, &eps, ev.Body
}

// SetEvents implements store.Outbox. It must be called before the store is
// shared.
func (s *Store) SetEvents(fn store.EventFunc) { s.events = fn }

// Outbox implements store.Outbox: it claims up to limit due rows for
// lease, skipping those another engine holds, so that one engine of the
// fleet delivers each (again only once its lease lapses).
func (s *Store) Outbox(limit int, lease time.Duration) ([]store.OutboxEntry, error) {
	ctx, cancel, err := s.ctx()
	if err != nil {
		return nil, err
	}
	defer cancel()
	rows, err := s.pool.Query(ctx, `UPDATE taskdeck_outbox o SET lease_until = now() + make_interval(secs => $2)
		FROM (SELECT rev, endpoint FROM taskdeck_outbox WHERE due <= now() AND lease_until < now()
			ORDER BY rev LIMIT $1 FOR UPDATE SKIP LOCKED) c
		WHERE o.rev = c.rev AND o.endpoint = c.endpoint
		RETURNING o.rev, o.endpoint, o.event_id, o.at, o.body, o.attempts`, limit, lease.Seconds())
	if err != nil {
		return nil, dbError("claim outbox events", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.OutboxEntry, error) {
		var e store.OutboxEntry
		var rev int64
		err := row.Scan(&rev, &e.Endpoint, &e.ID, &e.At, &e.Body, &e.Attempts)
		e.Rev = uint64(rev)
		return e, err
	})
	if err != nil {
		return nil, dbError("claim outbox events", err)
	}
	return out, nil
}

// OutboxRelease implements store.Outbox: the entries' leases end now.
func (s *Store) OutboxRelease(entries []store.OutboxEntry) error {
	if len(entries) == 0 {
		return nil
	}
	ctx, cancel, err := s.ctx()
	if err != nil {
		return err
	}
	defer cancel()
	revs, endpoints := make([]int64, len(entries)), make([]string, len(entries))
	for i, e := range entries {
		revs[i], endpoints[i] = int64(e.Rev), e.Endpoint
	}
	_, err = s.pool.Exec(ctx, `UPDATE taskdeck_outbox o SET lease_until = '-infinity'
		FROM unnest($1::bigint[], $2::text[]) AS r(rev, endpoint)
		WHERE o.rev = r.rev AND o.endpoint = r.endpoint`, revs, endpoints)
	if err != nil {
		return dbError("give back outbox events", err)
	}
	return nil
}

// OutboxDone implements store.Outbox, in one txn with the endpoint's
// counts.
func (s *Store) OutboxDone(e store.OutboxEntry, o store.Outcome, errText string, retryAt time.Time) error {
	ctx, cancel, err := s.ctx()
	if err != nil {
		return err
	}
	defer cancel()
	b := &pgx.Batch{}
	switch o {
	case store.Failed:
		b.Queue(`UPDATE taskdeck_outbox SET attempts = attempts + 1, due = $3, lease_until = '-infinity' WHERE rev = $1 AND endpoint = $2`,
			int64(e.Rev), e.Endpoint, retryAt)
	default:
		b.Queue(`DELETE FROM taskdeck_outbox WHERE rev = $1 AND endpoint = $2`, int64(e.Rev), e.Endpoint)
	}
	b.Queue(`INSERT INTO taskdeck_notify AS n (endpoint, delivered, expired, last_ok, last_error, last_error_at, failing)
		VALUES ($1, $2::bigint, $3::bigint, CASE WHEN $2::bigint > 0 THEN now() END, $4::text, CASE WHEN $5::boolean THEN now() END, $5::boolean)
		ON CONFLICT (endpoint) DO UPDATE SET delivered = n.delivered + EXCLUDED.delivered, expired = n.expired + EXCLUDED.expired,
			last_ok = coalesce(EXCLUDED.last_ok, n.last_ok), failing = EXCLUDED.failing,
			last_error = CASE WHEN EXCLUDED.failing THEN EXCLUDED.last_error ELSE n.last_error END,
			last_error_at = coalesce(EXCLUDED.last_error_at, n.last_error_at)`,
		e.Endpoint, b2i(o == store.Delivered), b2i(o == store.Expired), errText, o != store.Delivered)
	if err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error { return tx.SendBatch(ctx, b).Close() }); err != nil {
		return dbError("record a delivery", err)
	}
	return nil
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// OutboxStats implements store.Outbox.
func (s *Store) OutboxStats() (map[string]store.EndpointStats, error) {
	ctx, cancel, err := s.ctx()
	if err != nil {
		return nil, err
	}
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT coalesce(n.endpoint, p.endpoint), coalesce(n.delivered, 0), coalesce(n.expired, 0),
			n.last_ok, coalesce(n.last_error, ''), n.last_error_at, coalesce(n.failing, false), coalesce(p.pending, 0), p.oldest
		FROM taskdeck_notify n FULL JOIN (SELECT endpoint, count(*) AS pending, min(at) AS oldest FROM taskdeck_outbox GROUP BY endpoint) p
		ON n.endpoint = p.endpoint`)
	if err != nil {
		return nil, dbError("read the outbox", err)
	}
	out := map[string]store.EndpointStats{}
	var ep string
	var st store.EndpointStats
	var lastOK, lastErrAt, oldest *time.Time
	_, err = pgx.ForEachRow(rows, []any{&ep, &st.Delivered, &st.Expired, &lastOK, &st.LastError, &lastErrAt, &st.Failing, &st.Pending, &oldest}, func() error {
		st.LastOK, st.LastErrorAt, st.Oldest = deref(lastOK), deref(lastErrAt), deref(oldest)
		out[ep] = st
		return nil
	})
	if err != nil {
		return nil, dbError("read the outbox", err)
	}
	return out, nil
}

func deref(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}

// OutboxAdd implements store.Outbox: its rows, in one statement.
func (s *Store) OutboxAdd(ev *store.Event) error {
	if ev == nil || len(ev.Endpoints) == 0 {
		return nil
	}
	ctx, cancel, err := s.ctx()
	if err != nil {
		return err
	}
	defer cancel()
	if _, err := s.pool.Exec(ctx, `INSERT INTO taskdeck_outbox (rev, endpoint, event_id, at, body)
		SELECT $1, ep, $2, now(), $3 FROM unnest($4::text[]) AS ep`,
		int64(store.SoloRev(time.Now())), ev.ID, ev.Body, ev.Endpoints); err != nil {
		return dbError("add an outbox event", err)
	}
	return nil
}
