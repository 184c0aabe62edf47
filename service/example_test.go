package service_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http/httptest"
	"os"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/engine"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/service"
)

// own opens the engine in this process: what Open calls where no owner
// runs.
func own(dir string) func() (deck.Deck, error) {
	return func() (deck.Deck, error) {
		e, err := engine.Open(engine.Options{DataDir: dir})
		if err != nil {
			return nil, err
		}
		return e, nil
	}
}

// A Go program records its calls through the Deck: Open works through
// the owner's socket when a taskdeck owns the data directory, and opens
// the engine in process (and serves it) when none does. Either way the
// handle is on disk when Call returns, and the feed follows the task.
func Example() {
	// A tasks server to call: the demo, on loopback.
	mcp := httptest.NewServer(demo.New(demo.Options{Speed: 0.01}).Handler())
	defer mcp.Close()
	dir, err := os.MkdirTemp("", "taskdeck-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	ctx := context.Background()
	d, err := service.Open(ctx, service.Options{DataDir: dir, Own: own(dir)})
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()
	fmt.Println("owner:", d.Owner())

	res, err := d.Call(ctx, deck.CallRequest{
		Server: model.ServerRef{URL: mcp.URL},
		Tool:   "sleep",
		Args:   json.RawMessage(`{"seconds":2}`),
		Key:    "nightly-1", // the same key again returns this task, sending nothing
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Task.Tool, res.Task.Status)
	fmt.Println(follow(ctx, d, res.Task.ID))
	// Output:
	// owner: true
	// sleep working
	// sleep completed
}

// A second program on the same data directory works through the first
// one's socket; the records are one store's.
func Example_throughTheOwner() {
	mcp := httptest.NewServer(demo.New(demo.Options{Speed: 0.01}).Handler())
	defer mcp.Close()
	dir, err := os.MkdirTemp("", "taskdeck-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	first, err := service.Open(ctx, service.Options{DataDir: dir, Own: own(dir)})
	if err != nil {
		log.Fatal(err)
	}
	defer first.Close()

	second, err := service.Open(ctx, service.Options{DataDir: dir, Own: own(dir)})
	if err != nil {
		log.Fatal(err)
	}
	defer second.Close()
	fmt.Println("first owner:", first.Owner(), "second owner:", second.Owner())
	res, err := second.Call(ctx, deck.CallRequest{Server: model.ServerRef{URL: mcp.URL}, Tool: "echo", Args: json.RawMessage(`{"text":"hi"}`)})
	if err != nil {
		log.Fatal(err)
	}
	e, err := first.Get(ctx, res.Task.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("the owner has it:", e.Task.Tool, e.Task.Status)
	// Output:
	// first owner: true second owner: false
	// the owner has it: echo completed
}

// follow watches the feed until task id ends, and says how it ended.
func follow(ctx context.Context, d deck.Deck, id string) string {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	feed, err := d.Watch(ctx, 0)
	if err != nil {
		log.Fatal(err)
	}
	for ev := range feed.Events() {
		for _, e := range ev.Entries {
			if e.Task.ID == id && e.Task.Status.Terminal() {
				return fmt.Sprint(e.Task.Tool, " ", e.Task.Status)
			}
		}
	}
	return fmt.Sprint("the feed ended: ", feed.Err())
}
