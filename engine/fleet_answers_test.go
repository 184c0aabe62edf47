package engine

import (
	"encoding/json"
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
	_, es := fleet(t, srv, 2, testLease, testRenew)
	res, err := es[0].Call(ctxT(t), deck.CallRequest{Server: demoRef, Tool: "approve", Args: json.RawMessage(`{"action":"deploy"}`)})
	if err != nil {
		t.Fatal(err)
	}
	id := res.Task.ID
	var other *Engine
	waitFor(t, 10*time.Second, "an engine to claim the task", func() bool {
		for i, e := range es {
			if e.claims.holds(id) {
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
