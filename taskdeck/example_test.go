package taskdeck_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http/httptest"
	"os"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/taskdeck"
)

// A Go program calls a tool as a task, follows the task and answers the
// question it asks. Open chooses as the command line does: the owner's
// socket when a taskdeck owns the data directory, else the engine in
// this process (or, when the config's store is a database, always that).
func Example() {
	srv := httptest.NewServer(demo.New(demo.Options{Speed: 0.01}).Handler()) // a tasks server, on loopback
	defer srv.Close()
	dir, _ := os.MkdirTemp("", "taskdeck-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()

	d, err := taskdeck.Open(ctx, taskdeck.Options{DataDir: dir}) // no config: servers by URL
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()
	res, err := d.Call(ctx, deck.CallRequest{Server: model.ServerRef{URL: srv.URL}, Tool: "approve",
		Args: json.RawMessage(`{"action":"deploy"}`), Key: "deploy-42"}) // on disk when Call returns
	if err != nil {
		log.Fatal(err)
	}
	feed, err := d.Watch(ctx, res.Task.Revision-1) // the call's record, then each change after it
	if err != nil {
		log.Fatal(err)
	}
	answered := false // a later event may still show the question, until the answer is in
	for ev := range feed.Events() {
		for _, e := range ev.Entries {
			switch t := e.Task; {
			case t.ID != res.Task.ID:
			case t.Status.Terminal():
				fmt.Println(t.Tool, t.Status)
				return
			case len(t.PendingInputs()) > 0 && !answered:
				answers := map[string]json.RawMessage{}
				for _, k := range t.PendingInputs() {
					answers[k] = json.RawMessage(`{"action":"accept","content":{"approve":true,"reason":"tested"}}`)
				}
				if _, err := d.Answer(ctx, t.ID, answers); err != nil {
					log.Fatal(err)
				}
				answered = true
				fmt.Println("answered", t.InputRequests[t.PendingInputs()[0]].Method)
			}
		}
	}
	// Output:
	// answered elicitation/create
	// approve completed
}
