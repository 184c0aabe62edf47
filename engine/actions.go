package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/mcpclient"
	"github.com/taskdeck/taskdeck/mcpclient/wire"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store"
	"github.com/taskdeck/taskdeck/termtext"
	"github.com/taskdeck/taskdeck/tracing"
)

// keyConflictError means that an idempotency key already names another call.
type keyConflictError struct {
	Key      string
	Existing *model.Task
}

func (e *keyConflictError) Error() string {
	return fmt.Sprintf("key %q already names task %s (%s on %s) with other arguments; use another key, or `taskdeck forget %s` first",
		e.Key, e.Existing.ID, e.Existing.Tool, e.Existing.Server, e.Existing.ID)
}

// stateError means that the action does not fit the task's status.
type stateError struct {
	Task *model.Task
	Want string
}

func (e *stateError) Error() string {
	return fmt.Sprintf("task %s is %s: %s", e.Task.ID, e.Task.Status, e.Want)
}

// inputKeyError means that an answer names a key the task did not ask for, or one
// already answered.
type inputKeyError struct {
	TaskID, Key string
	Answered    bool
	// Winner is the answer that was taken, when Answered.
	Winner  *model.AnsweredInput
	Pending []string
}

func (e *inputKeyError) Error() string {
	if e.Answered {
		var won string
		if w := e.Winner; w != nil {
			won = " with " + termtext.OneLine(string(w.Response), 200)
			if who := w.Who(); who != "" {
				won += " by " + who
			}
			won += " at " + w.At.UTC().Format(time.RFC3339)
		}
		return fmt.Sprintf("task %s: input %q was already answered%s; each input is answered once, and this answer was not sent", e.TaskID, e.Key, won)
	}
	if len(e.Pending) == 0 {
		return fmt.Sprintf("task %s did not ask for input %q and asks for nothing now", e.TaskID, e.Key)
	}
	return fmt.Sprintf("task %s did not ask for input %q (it asks for: %s)", e.TaskID, e.Key, strings.Join(e.Pending, ", "))
}

// answerError means that an answer does not fit the request it answers.
type answerError struct {
	Key string
	Err error
}

func (e *answerError) Error() string { return fmt.Sprintf("input %q: %v", e.Key, e.Err) }
func (e *answerError) Unwrap() error { return e.Err }

// NormalizeArgs checks that tool arguments are one JSON object.
func NormalizeArgs(raw json.RawMessage) (json.RawMessage, error) {
	if len(strings.TrimSpace(string(raw))) == 0 {
		return json.RawMessage("{}"), nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return nil, errors.New(`arguments must be a JSON object, e.g. {"seconds": 5}`)
	}
	return wire.Compact(raw), nil
}

// Answer sends answers to a task's input requests. Answers are checked
// against the request first, then synced as answered (so no key is ever
// asked twice, also after a restart) and sent with tasks/update. If the
// send fails on the way they stay pending and every later poll re-sends
// them; if the server refuses them they are dropped, the task's state is
// fetched, and the keys may be answered again.
func (t *tracker) Answer(ctx context.Context, id string, answers map[string]json.RawMessage) (*model.Task, error) {
	defer t.tasks.lock(id)()
	rec, err := t.store.Get(id)
	if err != nil {
		return nil, err
	}
	if rec.Status == model.StatusWorking {
		// The record may be behind the server: ask before refusing.
		if res, err := t.poll(ctx, id); err == nil {
			rec = res.Task
		}
	}
	if rec.Status != model.StatusInputRequired {
		return nil, &stateError{Task: rec, Want: "it is not waiting for input"}
	}
	if rec.NeedsInput() {
		return nil, &stateError{Task: rec, Want: "it waits for input before its task exists; its answers go out with the call (Continue)"}
	}
	if answers, err = admitAnswers(ctx, rec, answers); err != nil {
		return nil, err
	}
	if len(answers) == 0 {
		return rec, nil // an agent's answers to keys no longer asked: ignored
	}
	since := rec.WaitingSince()
	rec, err = t.store.Update(id, t.claimAnswers(ctx, answers))
	if err != nil {
		return nil, err
	}
	t.answered(rec, since)
	sess, err := t.session(ctx, rec.Server)
	if err != nil {
		return rec, fmt.Errorf("answer saved, to be sent on the next poll: %w", err)
	}
	sent, err := t.flushAnswers(ctx, sess, rec)
	var refused *answerError
	switch {
	case sent == nil:
		return nil, err
	case errors.As(err, &refused):
		// Refused: ask for the task's state, which also tells a task
		// gone (-32602 on both) from an answer refused.
		res, perr := t.poll(ctx, id)
		switch {
		case errors.Is(perr, store.ErrFenced):
			return sent, err // another engine watches it and records its state
		case perr != nil:
			return sent, perr
		}
		if res.Task.Status == model.StatusUnknown {
			return res.Task, fmt.Errorf("%w: %s; the answer was not delivered", mcpclient.ErrTaskUnknown, res.Task.StatusMessage)
		}
		return res.Task, err
	case err != nil:
		return sent, fmt.Errorf("answer saved, to be sent on the next poll: %w", err)
	}
	return sent, nil
}

// claimAnswers is the write that claims input keys for answers: each key
// is marked answered, its answer pending (to be sent), by whoever asks.
// The check (admitAnswers) runs again on the record as stored, and the
// store runs it again on a record changed meanwhile (its write is
// conditional on the revision read): of two engines answering one key at
// once, one commits and sends; the other is refused, naming the answer
// taken (an agent's is dropped, as a server ignores it), and sends
// nothing.
func (t *tracker) claimAnswers(ctx context.Context, answers map[string]json.RawMessage) func(r *model.Task) (bool, error) {
	by := model.AnsweredInput{By: actorOf(ctx), Engine: t.owner.name()}
	return func(r *model.Task) (bool, error) {
		admitted, err := admitAnswers(ctx, r, answers)
		if err != nil || len(admitted) == 0 {
			return false, err
		}
		r.PendingAnswers = orEmpty(r.PendingAnswers)
		for k, v := range admitted {
			r.PendingAnswers[k] = wire.Compact(v)
		}
		keys := slices.Sorted(maps.Keys(admitted))
		r.MarkAnsweredBy(keys, t.now(), by)
		r.Act = &model.Act{Kind: model.ActAnswer, Actor: by.By, Keys: keys}
		return true, nil
	}
}

// admitAnswers checks answers before they are taken. The operator's (the
// dashboard, the commands) must answer keys still outstanding and fit
// their forms. An agent's, through the proxy (deck.ActorFrom names an
// agent), are the server's to judge, as without taskdeck: answers to keys
// not outstanding are dropped, as the tasks extension says a server
// SHOULD ignore them, and the rest go as sent.
func admitAnswers(ctx context.Context, rec *model.Task, answers map[string]json.RawMessage) (map[string]json.RawMessage, error) {
	if a, _ := deck.ActorFrom(ctx); a.Role != model.RoleAgent {
		return answers, checkAnswers(rec, answers)
	}
	out := map[string]json.RawMessage{}
	for k, v := range answers {
		if _, asked := rec.InputRequests[k]; asked && !rec.Answered(k) {
			out[k] = v
		}
	}
	return out, nil
}

// checkAnswers refuses an answer to a key the record did not ask for or
// already answered, and one that does not fit its request.
func checkAnswers(rec *model.Task, answers map[string]json.RawMessage) error {
	for _, key := range slices.Sorted(maps.Keys(answers)) {
		if rec.Answered(key) {
			e := &inputKeyError{TaskID: rec.ID, Key: key, Answered: true}
			if w, ok := rec.LastAnswer(key); ok {
				e.Winner = &w
			}
			return e
		}
		req, ok := rec.InputRequests[key]
		if !ok {
			return &inputKeyError{TaskID: rec.ID, Key: key, Pending: rec.PendingInputs()}
		}
		if err := model.ValidateAnswer(req, answers[key]); err != nil {
			return &answerError{Key: key, Err: err}
		}
	}
	return nil
}

// flushAnswers sends pending answers and clears them once acknowledged.
// After a failure on the way (the outcome is unknown; re-sending is
// harmless) they stay pending. Answers the server refused are dropped, so
// their keys may be answered again, and the error is an *answerError. A nil
// record means the store failed.
func (t *tracker) flushAnswers(ctx context.Context, sess *mcpclient.Session, rec *model.Task) (*model.Task, error) {
	sent := maps.Clone(rec.PendingAnswers)
	sctx, op := t.spans.Start(ctx, tracing.OpAnswer, rec, ServerLabel(rec.Server))
	cctx, cancel := context.WithTimeout(sctx, t.requestTimeout)
	err := sess.UpdateTask(cctx, rec.TaskID, sent)
	cancel()
	op.End(nil, err)
	var te *mcpclient.TransportError
	if errors.As(err, &te) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return rec, err
	}
	keys := slices.Sorted(maps.Keys(sent))
	if err != nil {
		// The server answered with an error: it did not take them.
		// (-32602 may also mean the task is gone; tasks/get tells.)
		dropped, serr := t.store.Update(rec.ID, func(r *model.Task) (bool, error) {
			r.DropAnswers(keys)
			return true, nil
		})
		if serr != nil {
			return nil, serr
		}
		return dropped, &answerError{Key: strings.Join(keys, ", "), Err: fmt.Errorf("the server refused the answer (%w); answer it again", err)}
	}
	return t.store.Update(rec.ID, func(r *model.Task) (bool, error) {
		for k := range sent {
			delete(r.PendingAnswers, k)
		}
		if len(r.PendingAnswers) == 0 {
			r.PendingAnswers = nil
		}
		return true, nil
	})
}

// Cancel asks the server to stop a task. The record is marked
// cancel-requested once the server acknowledged; its word on the outcome
// comes with the next polls (it may finish first).
func (t *tracker) Cancel(ctx context.Context, id string) (*model.Task, error) {
	defer t.tasks.lock(id)()
	rec, err := t.store.Get(id)
	if err != nil {
		return nil, err
	}
	switch {
	case rec.Status.Terminal():
		return rec, &stateError{Task: rec, Want: "it has already ended; nothing to cancel"}
	case !rec.Pollable():
		return rec, &stateError{Task: rec, Want: fmt.Sprintf("it has no server handle, so there is nothing to cancel; `taskdeck forget %s` removes the record", id)}
	}
	sess, err := t.session(ctx, rec.Server)
	if err != nil {
		return rec, err
	}
	sctx, op := t.spans.Start(ctx, tracing.OpCancel, rec, ServerLabel(rec.Server))
	cctx, cancel := context.WithTimeout(sctx, t.requestTimeout)
	err = sess.CancelTask(cctx, rec.TaskID)
	cancel()
	op.End(nil, err)
	switch {
	case errors.Is(err, mcpclient.ErrTaskUnknown):
		// Nothing left to stop, if tasks/get agrees that it is gone.
		res, perr := t.poll(ctx, id)
		switch {
		case errors.Is(perr, store.ErrFenced):
			return rec, fmt.Errorf("the server refused the cancel (%w); another engine watches this task and records what became of it", err)
		case perr != nil || !res.Task.Status.Pollable():
			return res.Task, perr
		case res.Err != nil:
			return res.Task, fmt.Errorf("the server refused the cancel (%w) and the task's state could not be checked (%v); it may still be running", err, res.Err)
		}
		return res.Task, fmt.Errorf("the server refused the cancel (%w) yet still reports the task; it was not cancelled", err)
	case errors.Is(err, mcpclient.ErrNoTasks):
		rec, serr := t.markUnknown(id, whyNoTasks)
		return rec, errors.Join(fmt.Errorf("cancel: %w", err), serr)
	case errors.As(err, new(*mcpclient.ServerError)):
		return rec, fmt.Errorf("the server refused the cancel (%w); the task was not cancelled", err)
	case err != nil:
		return rec, err // not acknowledged: the record stays as it was
	}
	return t.store.Update(id, func(r *model.Task) (bool, error) {
		changed := !r.CancelRequested
		r.CancelRequested = true
		r.Act = &model.Act{Kind: model.ActCancel, Actor: actorOf(ctx)}
		return changed, nil
	})
}

// Forget deletes a record without telling its server; the audit log
// names the actor ctx names.
func (t *tracker) Forget(ctx context.Context, id string) error {
	defer t.tasks.lock(id)()
	t.forgetPoll(id)
	return t.store.Delete(id, actorOf(ctx))
}

// Prune deletes finished records not changed for olderThan (0: all); the
// audit log names the actor ctx names.
func (t *tracker) Prune(ctx context.Context, olderThan time.Duration) (int, error) {
	var cutoff time.Time
	if olderThan > 0 {
		cutoff = t.now().Add(-olderThan)
	}
	return t.store.Prune(cutoff, actorOf(ctx))
}

// answered tells the observer of a wait for input that began at since,
// once every request of rec is answered.
func (t *tracker) answered(rec *model.Task, since time.Time) {
	if t.obs != nil && len(rec.PendingInputs()) == 0 {
		t.obs.Answered(ServerLabel(rec.Server), t.now().Sub(since))
	}
}
