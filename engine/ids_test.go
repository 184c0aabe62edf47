package engine

import (
	"encoding/json"
	"testing"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/demo"
)

// TestGetByUniqueSuffix: the dashboard's short ids are the ends of ids
// (ids of one minute share their start); Get takes them.
func TestGetByUniqueSuffix(t *testing.T) {
	srv := startDemo(t, demo.Options{})
	e := open(t, t.TempDir(), srv, Options{})
	ctx := ctxT(t)
	var ids []string
	for range 3 {
		res, err := e.Call(ctx, deck.CallRequest{Server: demoRef, Tool: "echo", Args: json.RawMessage(`{"text":"x"}`)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.Task.ID)
	}
	for _, id := range ids {
		got, err := e.Get(ctx, id[len(id)-6:])
		if err != nil || got.Task.ID != id {
			t.Fatalf("Get(%s) = %v, %v; want %s", id[len(id)-6:], got.Task, err, id)
		}
	}
}
