package store

import "github.com/taskdeck/taskdeck/model"

// Change is one committed change of a record.
type Change struct {
	Rev uint64
	ID  string
	// Task is the record as committed (Task.Revision == Rev); nil when it
	// was deleted.
	Task *model.Task
	// Prev is the status the record had before the change: "" for a new
	// record, or where the backend cannot tell (PostgreSQL, a change
	// another process committed). A watcher that holds only some records
	// keeps its counts per status with it.
	Prev model.Status
}

// Window is what a watcher that holds only some records starts with.
type Window struct {
	Rev      uint64
	Open     []*model.Task // sorted by id
	Finished []*model.Task // the newest, newest first
	Counts   map[model.Status]int
}
