package engine

import (
	"encoding/json"
	"testing"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/demo"
)

// A re-run's record names the record it repeats, from the first commit
// on (the intent) and after a restart.
func TestACallKeepsWhatItRepeats(t *testing.T) {
	srv := startDemo(t, demo.Options{})
	dir := t.TempDir()
	e := open(t, dir, srv, Options{})
	ctx := ctxT(t)
	first, err := e.Call(ctx, deck.CallRequest{Server: demoRef, Tool: "echo", Args: json.RawMessage(`{"text":"a"}`)})
	if err != nil {
		t.Fatal(err)
	}
	again, err := e.Call(ctx, deck.CallRequest{Server: demoRef, Tool: "echo", Args: json.RawMessage(`{"text":"a"}`), Repeats: first.Task.ID})
	if err != nil {
		t.Fatal(err)
	}
	if again.Task.Repeats != first.Task.ID || first.Task.Repeats != "" {
		t.Fatalf("repeats: the re-run %q, the first %q", again.Task.Repeats, first.Task.Repeats)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e = open(t, dir, srv, Options{})
	got, err := e.Get(ctx, again.Task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Task.Repeats != first.Task.ID {
		t.Fatalf("after a restart the re-run repeats %q, want %s", got.Task.Repeats, first.Task.ID)
	}
}
