package deck

import (
	"time"

	"github.com/taskdeck/taskdeck/model"
)

// Feed is one watcher's stream of events.
type Feed interface {
	// Events delivers events in revision order; it is closed when the feed
	// ends (ctx done, the deck closed or gone).
	Events() <-chan Event
	// Err tells why the feed ended, once Events is closed: nil when its
	// context ended, else the cause (the owner went away, say).
	Err() error
}

// EventKind says what an Event carries.
type EventKind string

const (
	// EventSnapshot means Entries is every record there is, as of Rev (for
	// WatchWindow: the open ones and the newest finished, with Counts);
	// a watcher replaces what it holds with it.
	EventSnapshot EventKind = "snapshot"
	// EventChange is one committed change at Rev. Entries holds the record
	// as committed (with its poll state), or Deleted names it.
	EventChange EventKind = "change"
	// EventPoll means only a task's poll state moved (polled, nothing changed,
	// or a poll failed; on a shared store also its watcher, for many
	// tasks in one event); nothing was committed, Rev is the last revision.
	EventPoll EventKind = "poll"
	// EventReconcile is the progress of the start-up reconcile.
	EventReconcile EventKind = "reconcile"
	// EventSnapshotMore is more records of the snapshot before it (a
	// WatchWindow snapshot comes in parts, so that its first event is
	// small and costs the same however many records are open); the last
	// part has More false. The first part is as of Rev; the open records
	// of the later parts are read as they are sent, so a part may hold a
	// record as changed after Rev, or miss one that was open at Rev and
	// ended before its part was read: that change follows the last part,
	// with Prev, as every change after Rev does.
	EventSnapshotMore EventKind = "snapshotMore"
	// EventCaughtUp means the replay after Watch(from) is over; what follows
	// is live.
	EventCaughtUp EventKind = "caughtUp"
	// EventStore means the store (a shared database) was lost or is back.
	// While it is lost the engine polls nothing; a watcher that comes
	// meanwhile hears it first.
	EventStore EventKind = "store"
)

// Event is one item of the feed.
type Event struct {
	Kind EventKind `json:"kind"`
	// Rev is the store-wide revision of the change (for a snapshot: the
	// revision it is as of). Resume with Watch(Rev) to see what follows.
	Rev       uint64     `json:"rev"`
	Entries   []Entry    `json:"entries,omitempty"`
	Deleted   []string   `json:"deleted,omitempty"`
	Reconcile *Reconcile `json:"reconcile,omitempty"`
	Store     *Store     `json:"store,omitempty"`
	// Counts is the number of records per status in the whole store as
	// of Rev, on the snapshot and the caughtUp of a WatchWindow feed.
	Counts map[model.Status]int `json:"counts,omitempty"`
	// More: parts of this snapshot follow (EventSnapshotMore). Resume
	// only from the revision of a snapshot's last part.
	More bool `json:"more,omitempty"`
	// Prev is the status the record of a change had before it: "" for
	// a new record, or where the store cannot tell (a shared database,
	// a change another host committed, or a change replayed on resume).
	Prev model.Status `json:"prev,omitempty"`
}

// Store is whether the engine reaches its store.
type Store struct {
	Up bool `json:"up"`
	// Error is the one-line cause of the loss (empty once up).
	Error string `json:"error,omitempty"`
	// Since is when it was lost, or came back.
	Since time.Time `json:"since"`
}

// Reconcile is what start-up reconciliation found so far.
type Reconcile struct {
	Total       int  `json:"total"` // open tasks to check
	Done        int  `json:"done"`  // checked so far
	Reattached  int  `json:"reattached"`
	Finished    int  `json:"finished"`
	Unknown     int  `json:"unknown"`
	Orphaned    int  `json:"orphaned"`
	Unreachable int  `json:"unreachable"`
	Over        bool `json:"over,omitempty"`
}

// Open reports the tasks a feed event leaves open, for watchers that
// follow tasks to their end.
func (e Entry) Open() bool { return e.Task != nil && e.Task.Status.Pollable() }
