package engine

import (
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store"
)

// owner is how an engine holds the tasks it polls and writes what their
// servers say: the one thing that tells one host from a fleet to the
// tracker. On Badger the store's lock makes this process the sole owner
// of every task (soleOwner); on a shared database the fleet's claims
// decide (fleetOwner).
type owner interface {
	// write records a server's word on task id; where another process
	// may hold the task, fenced: refused with store.ErrFenced.
	write(id string, fn func(t *model.Task) (bool, error)) (*model.Task, error)
	// maker names this engine on an intent it is about to make, once the
	// others can see it alive ("": the sole owner needs no name).
	maker() (string, error)
	// name is this engine's, kept with the answers it sends ("" alone).
	name() string
	// alone tells that no other process sends to the store's tasks: its
	// task locks then order every send, and a `calling` intent found at
	// Open is a crash's.
	alone() bool

	// The loop's questions.

	// run runs what keeps the holdings current while the loop lives (the
	// claim rounds), on goroutines the engine's ops count.
	run(l *loop)
	// schedules tells whether the loop schedules rec's polls itself as a
	// call or an answer leaves it; else the owner hands it to the loop
	// once it holds it.
	schedules(rec *model.Task) bool
	// mayPoll tells whether this engine may poll task id now.
	mayPoll(id string) bool
	// release lets task id go: its polls ended.
	release(id string)
	// committed hears every committed change, after the feed.
	committed(changes []store.Change)
	// watch names who watches rec ("" where it is this process, alone),
	// or says that no engine can.
	watch(rec *model.Task) (watcher string, noEngine bool)
	// refresh makes the view watch reads current for a request.
	refresh()
	// elsewhere tells whether another process watches rec now: this one
	// then neither polls it nor writes what its server says.
	elsewhere(rec *model.Task) bool
}

// soleOwner holds every task of a store no other process writes.
type soleOwner struct{ st store.Backend }

func (o soleOwner) write(id string, fn func(t *model.Task) (bool, error)) (*model.Task, error) {
	return o.st.Update(id, fn)
}

func (soleOwner) maker() (string, error)           { return "", nil }
func (soleOwner) name() string                     { return "" }
func (soleOwner) alone() bool                      { return true }
func (soleOwner) run(*loop)                        {}
func (soleOwner) schedules(*model.Task) bool       { return true }
func (soleOwner) mayPoll(string) bool              { return true }
func (soleOwner) release(string)                   {}
func (soleOwner) committed([]store.Change)         {}
func (soleOwner) watch(*model.Task) (string, bool) { return "", false }
func (soleOwner) refresh()                         {}
func (soleOwner) elsewhere(*model.Task) bool       { return false }
