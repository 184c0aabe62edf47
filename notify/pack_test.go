package notify_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	mcpconfig "github.com/taskdeck/taskdeck/mcpclient/config"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/notify"
)

// TestPackedBodyUnpacksToTheSameJSON: what an endpoint gets of an event
// the outbox kept packed is, byte for byte, the JSON of its payload, for
// every kind with every field set, in times of any zone and with none;
// the packed form is smaller; a payload Pack cannot pack exactly (a
// server's event, a foreign show command) stays JSON, and a damaged
// packed body is refused with an error. The field counts make a field
// added to the payload fail here until Pack carries it.
func TestPackedBodyUnpacksToTheSameJSON(t *testing.T) {
	for typ, n := range map[reflect.Type]int{reflect.TypeFor[notify.Payload](): 3, reflect.TypeFor[notify.Data](): 8,
		reflect.TypeFor[notify.TaskInfo](): 8, reflect.TypeFor[notify.Question](): 3, reflect.TypeFor[notify.Deadline](): 3} {
		if typ.NumField() != n {
			t.Errorf("%s has %d fields, Pack knows of %d: carry the new ones", typ, typ.NumField(), n)
		}
	}
	east := time.FixedZone("east", 3*3600)
	task := model.NewIntent(model.ServerRef{Name: "demo"}, "deploy", json.RawMessage(`{}`), "", time.Date(2026, 12, 2, 15, 4, 5, 123456789, east))
	task.Agent, task.StatusMessage, task.LocalError = "agent-7", "waiting for \"ok\" ✓", "the server said no"
	task.InputRequests = map[string]model.InputRequest{
		"b": {Method: "elicitation/create", Params: json.RawMessage(`{ "message": "Deploy?",  "n": 1.50 }`)},
		"a": {Method: "sampling/createMessage"},
	}
	task.WaitDeadline = &model.WaitDeadline{At: time.Date(2026, 12, 3, 0, 0, 0, 7, east), Outcome: "declined"}
	task.WaitDeadline.By.Name = "alice"
	kinds := []string{mcpconfig.EventInputRequired, mcpconfig.EventDeadline, mcpconfig.EventFound, "completed", "failed", "cancelled", "unknown", "orphaned"}
	for _, kind := range kinds {
		for _, tk := range []*model.Task{task, model.NewIntent(model.ServerRef{Name: "x"}, "t", nil, "", time.Time{})} {
			p := notify.NewPayload(kind, tk, time.Date(2026, 12, 2, 16, 0, 0, 987654321, east))
			want, err := json.Marshal(p)
			if err != nil {
				t.Fatal(err)
			}
			packed, err := notify.Pack(p)
			if err != nil {
				t.Fatal(err)
			}
			got, err := notify.Unpack(packed)
			if err != nil {
				t.Fatalf("%s: %v", kind, err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s: unpacked\n%s\nwant\n%s", kind, got, want)
			}
			if len(packed) >= len(want) || packed[0] == '{' {
				t.Errorf("%s: packed %d bytes, the JSON %d", kind, len(packed), len(want))
			}
			for cut := 1; cut < len(packed); cut += 7 {
				if _, err := notify.Unpack(packed[:cut]); err == nil {
					t.Errorf("%s: a body cut to %d of %d bytes unpacked", kind, cut, len(packed))
				}
			}
		}
	}
	p := notify.NewPayload("failed", task, time.Now())
	p.Data.Show = "something else"
	packed, _ := notify.Pack(p)
	if got, err := notify.Unpack(packed); err != nil || !json.Valid(got) || !bytes.Contains(got, []byte("something else")) {
		t.Errorf("a payload with a foreign show: %s, %v", got, err)
	}
}
