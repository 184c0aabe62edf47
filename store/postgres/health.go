package postgres

import (
	"context"
	"errors"
	"io"
	"net"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/taskdeck/taskdeck/store"
)

// SetHealthHook registers fn, told whenever the listener's connection to
// the database drops (err: why) or is made again (err nil), and after
// each Create, Update, ReleaseKey, Delete, Prune, Get, ByKey, ByStatus,
// All, Newest, Counts, Snapshot and ChangesSince whether the database
// was lost (err: a connection error) or answered (nil, even with a
// refusal): the engine's sign that the database is lost and back. nil
// removes it.
func (s *Store) SetHealthHook(fn func(err error)) {
	if fn == nil {
		s.healthHook.Store(nil)
		return
	}
	s.healthHook.Store(&fn)
}

// answered tells the hook of a request's outcome (*err, once it
// returns): lost, or answered.
func (s *Store) answered(err *error) {
	if fn := s.healthHook.Load(); fn != nil {
		if store.Unreachable(*err) {
			(*fn)(*err)
		} else {
			(*fn)(nil)
		}
	}
}

func (s *Store) health(err error) {
	if fn := s.healthHook.Load(); fn != nil {
		if err != nil {
			err = &dbErr{what: "listen for changes", err: err}
		}
		(*fn)(err)
	}
}

// Unreachable tells whether the database could not be reached (refused,
// dropped, timed out, shutting down), as against an answer it gave: see
// store.Unreachable.
func (e *dbErr) Unreachable() bool { return unreachable(e.err) }

// RefusesWrites tells whether the database answered but takes no writes
// now: read-only (a standby, or default_transaction_read_only), or out of
// disk, memory or connections (class 53). See store.RefusesWrites.
func (e *dbErr) RefusesWrites() bool { return refusesWrites(e.err) }

func (e *openLost) Unreachable() bool   { return unreachable(e.err) }
func (e *openLost) RefusesWrites() bool { return refusesWrites(e.err) }

func refusesWrites(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "25006" || pe.Code[:2] == "53")
}

// openLost is Open's failure to reach the database at all.
type openLost struct{ err error }

func (e *openLost) Error() string {
	return "cannot reach the PostgreSQL store: " + oneLine(e.err) + "; check that the database runs and --store names it"
}

func (e *openLost) Unwrap() error { return e.err }

func unreachable(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		// Class 08 is a connection exception; 57P01–57P03 a server
		// shutting down or starting.
		return pe.Code[:2] == "08" || pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03"
	}
	var ne net.Error
	return errors.As(err, new(*pgconn.ConnectError)) || errors.As(err, &ne) || pgconn.Timeout(err) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		pgconn.SafeToRetry(err)
}
