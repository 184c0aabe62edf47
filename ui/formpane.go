package ui

import (
	"encoding/json"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"github.com/taskdeck/taskdeck/ui/form"
)

// formTarget says what a form's answer is for: a new call's arguments,
// or an input request of a record (a task's, or a call's whose server
// asks before its task exists: before).
type formTarget struct {
	call        *newCall
	taskID, key string
	tool        string
	before      bool
}

// newCall is a call being put together in the dashboard.
type newCall struct {
	server, tool string
	args         json.RawMessage
	key          string // the idempotency key, "" for none
}

// formPane is the form on screen and what its answer is for.
type formPane struct {
	form   *form.Form
	target formTarget
}

// formOutcome is what a message to the form came to: nothing yet, the
// form's result (done), or the operator's wish to decline or cancel the
// input request (refuse), which the root asks about first.
type formOutcome struct {
	done   bool
	result form.Result
	refuse bool
}

// Update hands a message (a key, or what the form's own commands return)
// to the form.
func (p *formPane) Update(msg tea.Msg, k KeyMap) (formOutcome, tea.Cmd) {
	if kp, ok := msg.(tea.KeyPressMsg); ok && p.form.Answers() && key.Matches(kp, k.Refuse) {
		return formOutcome{refuse: true}, nil
	}
	var cmd tea.Cmd
	p.form, cmd = p.form.Update(msg)
	res, done := p.form.Done()
	return formOutcome{done: done, result: res}, cmd
}
