// Package store is what the engine asks of a task store (Backend), the
// errors every backend words its failures with, and what the backends
// share: the change feed's Change, the audit log's reader, the outbox's
// types and the checks of a write. The backends are store/badger (one
// process, embedded) and store/postgres (a fleet's shared database); both
// pass the contract suite in store/storetest.
package store

import (
	"time"

	"github.com/taskdeck/taskdeck/model"
)

// Backend is what the engine needs of a task store. store/badger is the
// embedded default; store/postgres keeps the records of a fleet in one
// database. Every backend passes the contract suite in store/storetest, and
// the doc comments of badger.Store's methods are the contract: a write returns only
// once committed durably, Update writes nothing when fn reports no change,
// an idempotency key names one record (a *DuplicateKeyError otherwise),
// misses wrap ErrNotFound, and revisions are store-wide and commit-ordered.
//
// The commit hook of a backend shared by several processes also hears the
// other processes' commits. It may then skip a revision whose record was
// written again before the hook heard it (as ChangesSince does): what it
// hears is strictly increasing, and replaying it gives the store's records.
// AuditTail is a Backend that reads its audit log's ends alone. LastAudit
// gives the canonical bytes of the entry at the highest revision kept;
// found is false when the log is empty. AuditCheckpoint gives where the
// kept log starts (zero before any prune): with one entry per revision,
// the log holds Revision() minus its Rev entries.
type AuditTail interface {
	LastAudit() (rev uint64, body []byte, found bool, err error)
	AuditCheckpoint() (model.AuditCheckpoint, error)
}

type Backend interface {
	Create(rec *model.Task) error
	Update(id string, fn func(t *model.Task) (changed bool, err error)) (*model.Task, error)
	ReleaseKey(id string, release func(t *model.Task) bool) (*model.Task, error)
	Get(id string) (*model.Task, error)
	ByKey(key string) (*model.Task, error)
	ByStatus(st ...model.Status) ([]*model.Task, error)
	// Handles returns the handles of the records with any of the given
	// statuses, sorted by ID, without decoding the rest of each record:
	// an owner starting on 100,000 open tasks needs only these.
	Handles(st ...model.Status) ([]model.Handle, error)
	OpenTasks() ([]*model.Task, error)
	All() ([]*model.Task, error)
	// MatchIDs returns up to limit ids, in id order, of the records whose
	// id starts or ends with part, read from the ids alone: an operator's
	// short id decodes no record.
	MatchIDs(part string, limit int) ([]string, error)
	Newest(limit int) ([]*model.Task, error)
	Delete(id string, by model.Actor) error
	Prune(cutoff time.Time, by model.Actor) (int, error)
	Counts() (map[model.Status]int, error)
	CountsAt() (rev uint64, counts map[model.Status]int, err error)
	Window(finished int) (Window, error)
	Page(before string, limit int, statuses ...model.Status) ([]*model.Task, error)
	Revision() uint64
	SetCommitHook(fn func([]Change))
	Snapshot() (rev uint64, tasks []*model.Task, err error)
	ChangesSince(rev uint64) (changes []Change, upTo uint64, ok bool, err error)
	AuditLog(after uint64, fn AuditFunc) (model.AuditCheckpoint, error)
	PruneAudit(cutoff time.Time) (int, error)
	Close() error
}
