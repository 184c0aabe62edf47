package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/model"
)

// An operator answers on one engine while another watches the task and
// polls it often: the answer reaches the server once (the watcher does
// not re-send pending answers another engine may be sending).
func TestFleetAnswerElsewhereSentOnce(t *testing.T) {
	srv := startDemo(t, demo.Options{Speed: 1, PollInterval: 50 * time.Millisecond, NoPush: true})
	// Each tasks/update takes 1.5 s to answer: the watcher polls meanwhile.
	updates := srv.RecordPolls("tasks/update", 1500*time.Millisecond)
	_, es := openFleet(t, srv, 2, testLease, testRenew)
	res, err := es[0].Call(ctxT(t), deck.CallRequest{Server: demoRef, Tool: "approve", Args: json.RawMessage(`{"action":"deploy"}`)})
	if err != nil {
		t.Fatal(err)
	}
	id := res.Task.ID
	var other *Engine
	waitFor(t, 10*time.Second, "an engine to claim the task", func() bool {
		for i, e := range es {
			if e.claims.Holds(id) {
				other = es[1-i]
				return true
			}
		}
		return false
	})
	waitFor(t, 10*time.Second, "the task to ask for input", func() bool {
		en, err := other.Get(ctxT(t), id)
		return err == nil && en.Task.Status == model.StatusInputRequired
	})
	answer := map[string]json.RawMessage{"approve-1": json.RawMessage(`{"action":"accept","content":{"approve":true,"reason":"ok"}}`)}
	if _, err := other.Answer(ctxT(t), id, answer); err != nil {
		t.Fatal(err)
	}
	if n := len(updates.Of(res.Task.TaskID)); n != 1 {
		t.Errorf("the answer reached the server %d times, want once", n)
	}
}

// TestFleetRacingAnswersOneReachesServer: two engines on one database
// answer each of 50 inputs at the same moment with different answers.
// Exactly one tasks/update per input reaches the server, the server took
// the answer the record lists, and each loser is refused naming the
// answer taken and who gave it.
func TestFleetRacingAnswersOneReachesServer(t *testing.T) {
	srv := startDemo(t, demo.Options{Speed: 1, PollInterval: 50 * time.Millisecond, NoPush: true})
	updates := srv.RecordPolls("tasks/update", 0)
	_, es := openFleet(t, srv, 2, DefaultClaimLease, DefaultClaimRenew)
	const n = 50
	var recs []*model.Task
	for i := range n {
		res, err := es[i%2].Call(ctxT(t), deck.CallRequest{Server: demoRef, Tool: "approve", Args: json.RawMessage(`{"action":"deploy"}`)})
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, res.Task)
	}
	for _, rec := range recs {
		waitFor(t, 30*time.Second, "the task to ask for input", func() bool {
			en, err := es[0].Get(ctxT(t), rec.ID)
			return err == nil && en.Task.Status == model.StatusInputRequired
		})
	}
	operators := []model.Actor{{Name: "alice", Role: model.RoleOperator}, {Name: "bob", Role: model.RoleOperator}}
	answer := func(who int) map[string]json.RawMessage {
		return map[string]json.RawMessage{"approve-1": json.RawMessage(fmt.Sprintf(`{"action":"accept","content":{"approve":%t,"reason":"by %s"}}`, who == 0, operators[who].Name))}
	}
	errs := make([][2]error, n)
	var wg sync.WaitGroup
	for i, rec := range recs {
		for who := range 2 {
			wg.Go(func() {
				ctx := deck.WithActor(ctxT(t), operators[who])
				_, errs[i][who] = es[who].Answer(ctx, rec.ID, answer(who))
			})
		}
	}
	wg.Wait()
	for i, rec := range recs {
		if k := len(updates.Of(rec.TaskID)); k != 1 {
			t.Errorf("task %s: %d tasks/update reached the server, want exactly 1", rec.ID, k)
		}
		var won []int
		for who, err := range errs[i] {
			if err == nil {
				won = append(won, who)
			}
		}
		if len(won) != 1 {
			t.Errorf("task %s: %d of the two answers were taken (errors %v), want exactly one", rec.ID, len(won), errs[i])
			continue
		}
		winner := operators[won[0]].Name
		lost := errs[i][1-won[0]]
		var keyErr *inputKeyError
		var ended *stateError
		switch {
		case errors.As(lost, &ended) && ended.Task.Status.Terminal():
			// On a busy machine the loser may come after the winner's answer
			// ended the task: refused as well, nothing sent.
		case !errors.As(lost, &keyErr) || !keyErr.Answered || !strings.Contains(lost.Error(), `"reason":"by `+winner+`"`) || !strings.Contains(lost.Error(), "by "+winner) || !strings.Contains(lost.Error(), "through engine"):
			t.Errorf("task %s: the loser's error %q does not name the answer taken (by %s)", rec.ID, lost, winner)
		}
		// The record lists what the server took: its result names the reason sent.
		var got *model.Task
		waitFor(t, 30*time.Second, "the task to complete", func() bool {
			en, err := es[0].Get(ctxT(t), rec.ID)
			got = en.Task
			return err == nil && got.Status.Terminal()
		})
		if len(got.Answers) != 1 || !strings.Contains(string(got.Answers[0].Response), "by "+winner) || got.Answers[0].By.Name != winner {
			t.Errorf("task %s: the record's answers %+v, want the one answer of %s", rec.ID, got.Answers, winner)
		}
		if !strings.Contains(string(got.Result), "by "+winner) {
			t.Errorf("task %s: the server took %s, the record lists %s's answer", rec.ID, got.Result, winner)
		}
	}
}
