package model

import "slices"

// Kinds of act: what a change to a record was, as the audit log names it.
const (
	ActCall   = "call"   // a tools/call made (the record's creation)
	ActRerun  = "rerun"  // a call made again from an ended record
	ActAnswer = "answer" // answers given to input requests
	ActCancel = "cancel" // a cancel the server acknowledged
	ActForget = "forget" // a record deleted without telling its server
	ActPrune  = "prune"  // an ended record deleted by age
	ActOrphan = "orphan" // an intent whose process died, marked orphaned
	ActUpdate = "update" // the engine's own change: a poll's news, a push, a retry
	ActFound  = "found"  // a task a server lists that no record held, recorded
	ActAdopt  = "adopt"  // a found task taken to be watched
	ActLeave  = "leave"  // a found task left to its server
	// ActDeadline: a deadline set on a wait for input; ActEscalate: the
	// engine's act at a wait's deadline (the event, and a decline or a
	// cancel where the config asks).
	ActDeadline = "deadline"
	ActEscalate = "escalate"
)

// Act names one change to a record: what was done, by whom, and for an
// answer which input keys. A record keeps the act of its last change; the
// audit log keeps every one.
type Act struct {
	Kind  string   `json:"kind"`
	Actor Actor    `json:"actor"`
	Keys  []string `json:"keys,omitempty"`
}

// EngineActor is taskdeck acting on its own, from host (set on a fleet).
func EngineActor(host string) Actor {
	return Actor{Name: "engine", Role: RoleEngine, Host: host}
}

// Attribute names who made the change from prev (nil for a new record) to
// t. A change that named no act is the engine's own (by). Every transition
// and answer the change added carries the act's actor, so that the history
// says who moved the task and who answered, after the act itself is gone.
func (t *Task) Attribute(prev *Task, by Actor) {
	if t.Act == nil {
		t.Act = &Act{Kind: ActUpdate, Actor: by}
	}
	var hist, answers int
	if prev != nil {
		hist, answers = len(prev.History), len(prev.Answers)
	}
	for i := min(hist, len(t.History)); i < len(t.History); i++ {
		if t.History[i].By.IsZero() {
			t.History[i].By = t.Act.Actor
		}
	}
	for i := min(answers, len(t.Answers)); i < len(t.Answers); i++ {
		if t.Answers[i].By.IsZero() {
			t.Answers[i].By = t.Act.Actor
		}
	}
}

func (a *Act) clone() *Act {
	if a == nil {
		return nil
	}
	c := *a
	c.Keys = slices.Clone(a.Keys)
	return &c
}
