package store

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/taskdeck/taskdeck/model"
)

// Claim is an engine's lease on polling one task of a shared store. Fence
// grows with every claim of the task (from 1), so a write carrying an
// older one is refused with ErrFenced. Fence 0 is no claim: a write
// carrying it is refused while any engine holds a live claim on the task.
type Claim struct {
	ID    string
	Owner string
	Fence uint64
}

// Fleet is what an engine knows of the others on a shared store, read in
// one round per claim round: no write per task.
type Fleet struct {
	// Watchers names the engine holding a live claim on each open task.
	Watchers map[string]string
	// Reachable holds the servers (names and ad-hoc URLs) that some live
	// engine can poll: a task of any other has no one to watch it.
	Reachable map[string]bool
	// Alive holds the names of the engines alive on the database: an
	// intent whose maker is not among them is a dead process's.
	Alive map[string]bool
	// NextExpiry is when, by this host's clock, the first live claim of another engine on an
	// open task of the servers asked about runs out (zero: none).
	NextExpiry time.Time
}

// Shared is a Backend several engines share, each polling the tasks it
// claims (store/postgres; its methods' doc comments are the contract).
// The engine reaches it only through this interface, so that it links no
// backend of its own.
type Shared interface {
	Backend
	SetAuditKey(key []byte)
	// SetHealthHook has fn told of the listener's connection, dropped
	// (an error) or connected again (nil), and of each Backend request's
	// outcome: the database lost (a connection error) or answered (nil).
	SetHealthHook(fn func(err error))
	ClaimTasks(engine string, servers []string, limit int, lease time.Duration) ([]Claim, error)
	ClaimExpired(engine string, servers []string, limit int, lease time.Duration) ([]Claim, error)
	RenewClaims(claims []Claim, lease time.Duration) ([]Claim, error)
	UpdateClaimed(c Claim, fn func(t *model.Task) (changed bool, err error)) (*model.Task, error)
	Heartbeat(engine string, servers []string, lease time.Duration) error
	Leave(engine string) error
	Fleet(me string, servers []string) (Fleet, error)
	Watcher(id string) (string, error)
	Tasks(ids []string) ([]*model.Task, error)
	Ages(ids []string) (map[string]time.Duration, error)
	Share(prefix string, servers []string) (engines, open int, err error)
}

// OpenSharedFunc opens a shared store from its connection string.
type OpenSharedFunc func(ctx context.Context, conn string, logger *slog.Logger) (Shared, error)

var shared struct {
	sync.Mutex
	open OpenSharedFunc
}

// RegisterShared makes open the opener of shared stores; store/postgres
// registers itself when imported, as database/sql's drivers do, and a
// program that opens a fleet's database imports it.
func RegisterShared(open OpenSharedFunc) {
	shared.Lock()
	defer shared.Unlock()
	shared.open = open
}

// OpenShared opens the shared store conn names with the registered opener.
func OpenShared(ctx context.Context, conn string, logger *slog.Logger) (Shared, error) {
	shared.Lock()
	open := shared.open
	shared.Unlock()
	if open == nil {
		return nil, errors.New("this program links no PostgreSQL backend (import github.com/taskdeck/taskdeck/store/postgres)")
	}
	return open(ctx, conn, logger)
}
