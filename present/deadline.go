package present

import (
	"time"

	"github.com/taskdeck/taskdeck/model"
)

// AnswerBy is a wait's deadline as a person reads it at now, beside the
// server's TTL where the task has one: "in 1h12m (2026-12-02 17:00:00,
// set by alice) · server TTL in 40m"; "" when there is none.
func AnswerBy(t *model.Task, d *model.WaitDeadline, now time.Time) string {
	if d == nil {
		return ""
	}
	s := "in " + Age(d.At.Sub(now))
	if !d.At.After(now) {
		s = "passed " + Age(now.Sub(d.At)) + " ago"
	}
	s += " (" + d.At.Local().Format(time.DateTime)
	if !d.By.IsZero() {
		s += ", set by " + d.By.Name
	} else {
		s += ", configured"
	}
	s += ")"
	if exp := t.Deadline(); !exp.IsZero() {
		if exp.After(now) {
			s += " · server TTL in " + Age(exp.Sub(now))
		} else {
			s += " · server TTL over"
		}
	}
	if !d.Escalated.IsZero() {
		s += " · escalated " + d.Escalated.Local().Format(time.TimeOnly)
		if d.Outcome != "" {
			s += ": " + d.Outcome
		}
	}
	return s
}

// TTLBeforeDeadline is the warning for a wait whose server drops the task
// (its TTL) before the deadline: the task would end before anyone must
// answer. "" when it does not.
func TTLBeforeDeadline(t *model.Task, d *model.WaitDeadline) string {
	exp := t.Deadline()
	if d == nil || exp.IsZero() || !exp.Before(d.At) {
		return ""
	}
	return "the server's TTL ends " + Age(d.At.Sub(exp)) + " before the deadline: the task ends before anyone must answer"
}
