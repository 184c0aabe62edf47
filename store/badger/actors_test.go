package badger_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store/badger"
)

// TestActorsKeptOnceReadBack: records whose "by"s repeat their act's
// actor (a call by alice, the engine's move, bob's answer; one with its
// arguments kept apart, one open) read back after a reopen, through Get,
// All and Snapshot, exactly as they were written, every "by" in place; a
// record stored whole, as schema 3 stored it, reads back as it is.
func TestActorsKeptOnceReadBack(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	alice := model.Actor{Name: "alice", Role: model.RoleUser}
	bob := model.Actor{Name: "agent-b", Role: model.RoleAgent, Label: "claude"}
	big := intent("", t0)
	big.Arguments = json.RawMessage(`{"note":"` + strings.Repeat("x", 2048) + `"}`)
	want := map[string]*model.Task{}
	for _, rec := range []*model.Task{intent("", t0), big} {
		rec.Act = &model.Act{Kind: model.ActCall, Actor: alice}
		must(t, s.Create(rec))
		_, err := s.Update(rec.ID, func(r *model.Task) (bool, error) {
			r.InputRequests = map[string]model.InputRequest{"ok": {Method: "elicitation/create"}}
			return true, r.MoveTo(model.StatusInputRequired, "", t0)
		})
		must(t, err)
		got, err := s.Update(rec.ID, func(r *model.Task) (bool, error) {
			r.PendingAnswers = map[string]json.RawMessage{"ok": json.RawMessage(`{"action":"accept"}`)}
			r.MarkAnswered([]string{"ok"}, t0)
			r.Act = &model.Act{Kind: model.ActAnswer, Actor: bob, Keys: []string{"ok"}}
			return true, r.MoveTo(model.StatusWorking, "answered", t0)
		})
		must(t, err)
		want[got.ID] = got
	}
	done := create(t, s, "", model.StatusCompleted, t0)
	want[done.ID] = done
	for _, r := range want {
		if by := r.History[len(r.History)-1].By; by.IsZero() {
			t.Fatalf("task %s: its last transition names no actor", r.ID)
		}
	}
	// The completed record as schema 3 stored it: its JSON, whole.
	whole, err := json.Marshal(done)
	must(t, err)
	must(t, badger.PutRaw(s, "t\x00"+done.ID, string(whole)))
	must(t, s.Close())

	s = openStore(t, dir)
	check := func(how string, got *model.Task) {
		t.Helper()
		w, ok := want[got.ID]
		if !ok {
			t.Fatalf("%s: task %s was never written", how, got.ID)
		}
		a, err := json.Marshal(got)
		must(t, err)
		b, err := json.Marshal(w)
		must(t, err)
		if string(a) != string(b) {
			t.Fatalf("%s reads\n%s\nwant\n%s", how, a, b)
		}
	}
	for id := range want {
		got, err := s.Get(id)
		must(t, err)
		check("Get", got)
	}
	all, err := s.All()
	must(t, err)
	_, snap, err := s.Snapshot()
	must(t, err)
	if len(all) != len(want) || len(snap) != len(want) {
		t.Fatalf("All %d, Snapshot %d records; want %d", len(all), len(snap), len(want))
	}
	for i := range all {
		check("All", all[i])
		check("Snapshot", snap[i])
	}
}
