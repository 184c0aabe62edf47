package notify_test

import (
	"encoding/json"
	"testing"
	"time"

	mcpconfig "github.com/taskdeck/taskdeck/mcpclient/config"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/notify"
)

// BenchmarkEvents: the store's event function on the writer's goroutine
// before each commit, for a task that starts waiting for input with one
// question (an event for a webhook and a command hook), and for a change
// that makes no event (a task going on working).
func BenchmarkEvents(b *testing.B) {
	c, err := mcpconfig.ParseConfig("c.json", []byte(`{"notify":{
		"webhooks":[{"url":"https://hooks.example/td","secret":"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw","events":["input_required","failed"]}],
		"commands":[{"argv":["notify-send","taskdeck"],"events":["input_required"]}]}}`))
	if err != nil {
		b.Fatal(err)
	}
	events := notify.Events(c.Notify)
	now := time.Now()
	working := model.NewIntent(model.ServerRef{Name: "demo"}, "deploy", json.RawMessage(`{"env":"prod"}`), "", now)
	_ = working.MoveTo(model.StatusWorking, "", now)
	waiting := working.Clone()
	_ = waiting.MoveTo(model.StatusInputRequired, "", now)
	waiting.InputRequests = map[string]model.InputRequest{"approve": {Method: "elicitation/create",
		Params: json.RawMessage(`{"message":"Deploy build 4411 to prod?","requestedSchema":{"type":"object","properties":{"ok":{"type":"boolean"}}}}`)}}
	b.Run("event", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if ev := events(working, waiting); ev == nil || len(ev.Endpoints) != 2 {
				b.Fatalf("event %+v", ev)
			}
		}
	})
	b.Run("none", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if ev := events(working, working); ev != nil {
				b.Fatalf("event %+v", ev)
			}
		}
	})
}
