package wire

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/taskdeck/taskdeck/model"
)

// The spec's notifications/tasks example (its params), with the
// subscription id every listen stream message carries.
const specNotification = `{"taskId":"786512e2-9e0d-44bd-8f29-789f320fe840",
 "status":"completed","createdAt":"2025-11-25T10:30:00Z","lastUpdatedAt":"2025-11-25T10:50:00Z",
 "ttlMs":60000,"pollIntervalMs":5000,
 "result":{"content":[{"type":"text","text":"Operation completed successfully."}],"isError":false},
 "_meta":{"io.modelcontextprotocol/subscriptionId":7}}`

func TestDecodeTaskNotification(t *testing.T) {
	snap, err := DecodeTaskNotification(json.RawMessage(specNotification))
	if err != nil {
		t.Fatal(err)
	}
	if snap.Status != model.StatusCompleted || snap.IsError || !snap.CreatedAt.Equal(specCreatedAt) ||
		string(snap.Result) != `{"content":[{"type":"text","text":"Operation completed successfully."}],"isError":false}` {
		t.Fatalf("snapshot %+v", snap)
	}
	// Checked as tasks/get is: a completed task without its result is invalid.
	for _, bad := range []string{
		`{"taskId":"a","status":"completed","createdAt":"2025-11-25T10:30:00Z","lastUpdatedAt":"2025-11-25T10:30:00Z","ttlMs":null}`,
		`[1]`,
	} {
		if _, err := DecodeTaskNotification(json.RawMessage(bad)); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", bad, err)
		}
	}
}

// The server's messages marshal flat, as the spec shows them.
func TestPushShapes(t *testing.T) {
	ttl := Ms(60000)
	p := &TaskNotificationParams{DetailedTask: DetailedTask{Task: Task{TaskID: "t", Status: "working",
		CreatedAt: "c", LastUpdatedAt: "u", TTLMs: &ttl}}}
	p.Meta = map[string]any{MetaSubscriptionID: 7}
	ack := &AcknowledgedParams{Notifications: ListenFilter{TaskIDs: []string{"t"}}}
	end := &ListenResult{ResultType: ResultTypeComplete}
	for v, want := range map[any]string{
		p:   `{"_meta":{"io.modelcontextprotocol/subscriptionId":7},"taskId":"t","status":"working","createdAt":"c","lastUpdatedAt":"u","ttlMs":60000}`,
		ack: `{"notifications":{"taskIds":["t"]}}`,
		end: `{"resultType":"complete"}`,
	} {
		if b, _ := json.Marshal(v); string(b) != want {
			t.Errorf("got  %s\nwant %s", b, want)
		}
	}
}
