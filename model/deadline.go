package model

import "time"

// WaitDeadline is when a task's wait for input is to be answered by
// (issue 27). The record holds one an operator set, and the one the
// engine escalated (which marks the wait as told, across restarts); a
// deadline from the config is otherwise derived from the wait's start
// (Task.AnswerDeadline) and not written.
type WaitDeadline struct {
	At time.Time `json:"at"`
	// Wait is when the wait it belongs to began (Task.WaitingSince): a
	// later wait of the same task is not bound by it.
	Wait time.Time `json:"wait"`
	// By set it; zero: the config's (the server's or tool's "deadline").
	By Actor `json:"by,omitzero"`
	// Escalated is when the engine emitted the deadline event: once per
	// wait. Outcome is what it did besides, with why ("" for nothing).
	Escalated time.Time `json:"escalated,omitzero"`
	Outcome   string    `json:"outcome,omitempty"`
}

// AnswerDeadline is the deadline of the task's current wait, when it
// waits for an answer: the record's for this wait, else the wait's start
// plus cfg (0: none configured); nil when there is none.
func (t *Task) AnswerDeadline(cfg time.Duration) *WaitDeadline {
	if !t.WaitsForInput() {
		return nil
	}
	since := t.WaitingSince()
	if d := t.WaitDeadline; d != nil && d.Wait.Equal(since) {
		c := *d
		return &c
	}
	if cfg <= 0 {
		return nil
	}
	return &WaitDeadline{At: since.Add(cfg), Wait: since}
}

// Escalates tells whether the change from prev to t is the engine's
// escalation of a wait at its deadline: the deadline event.
func (t *Task) Escalates(prev *Task) bool {
	d := t.WaitDeadline
	if d == nil || d.Escalated.IsZero() {
		return false
	}
	return prev == nil || prev.WaitDeadline == nil || !prev.WaitDeadline.Wait.Equal(d.Wait) || prev.WaitDeadline.Escalated.IsZero()
}
