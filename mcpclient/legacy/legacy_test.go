package legacy

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/taskdeck/taskdeck/mcpclient/wire"
	"github.com/taskdeck/taskdeck/model"
)

func TestDecodeCallResult(t *testing.T) {
	out, err := DecodeCallResult(json.RawMessage(`{"task":{"taskId":"t1","status":"working","ttl":60000,"pollInterval":1000,"createdAt":"2026-01-02T03:04:05Z","lastUpdatedAt":"2026-01-02T03:04:05Z"}}`))
	if err != nil || out.Task == nil {
		t.Fatalf("handle: %v %+v", err, out)
	}
	if s := out.Task; s.TaskID != "t1" || s.Status != model.StatusWorking || *s.TTLMs != 60000 || *s.PollIntervalMs != 1000 || s.Protocol != ProtocolVersion || s.CreatedAt.IsZero() {
		t.Fatalf("snapshot %+v", s)
	}
	out, err = DecodeCallResult(json.RawMessage(`{"content":[{"type":"text","text":"hi"}],"isError":true}`))
	if err != nil || out.Task != nil || !out.IsError || !strings.Contains(string(out.Result), "hi") {
		t.Fatalf("direct result: %v %+v", err, out)
	}
	for _, bad := range []string{
		`{"resultType":"task","taskId":"t1","status":"working"}`, // the other revision's handle
		`{"task":{"status":"working"}}`,                          // no id
		`{"task":{"taskId":"t1","status":"sleeping"}}`,           // unknown status
		`{"task":"t1"}`,
		`null`,
		`[1]`,
	} {
		if _, err := DecodeCallResult(json.RawMessage(bad)); !errors.Is(err, wire.ErrInvalid) {
			t.Errorf("%s: %v; want ErrInvalid", bad, err)
		}
	}
}

func TestCapabilitiesAndTaskSupport(t *testing.T) {
	init := json.RawMessage(`{"protocolVersion":"2025-11-25","capabilities":{"tasks":{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}}}`)
	if !CallsAsTasks(init) || !Lists(init) {
		t.Fatal("capabilities.tasks not read")
	}
	if CallsAsTasks(json.RawMessage(`{"capabilities":{"tasks":{}}}`)) || Lists(json.RawMessage(`{"capabilities":{}}`)) {
		t.Fatal("capabilities the server did not offer")
	}
	for tool, want := range map[string]string{
		`{"name":"a","execution":{"taskSupport":"required"}}`: "required",
		`{"name":"a","execution":{"taskSupport":"optional"}}`: "optional",
		`{"name":"a","execution":{"taskSupport":"always"}}`:   "forbidden",
		`{"name":"a"}`: "forbidden",
		``:             "forbidden",
	} {
		if got := TaskSupport(json.RawMessage(tool)); got != want {
			t.Errorf("%s: %s, want %s", tool, got, want)
		}
	}
}

func TestWithTask(t *testing.T) {
	p, err := WithTask(json.RawMessage(`{"name":"x","arguments":{"a":1}}`), TaskParams{TTL: 5000})
	if err != nil || !strings.Contains(string(p), `"task":{"ttl":5000}`) || !strings.Contains(string(p), `"arguments":{"a":1}`) {
		t.Fatalf("%s %v", p, err)
	}
	p, err = WithTasksCapability(json.RawMessage(`{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}}}`))
	if err != nil || !strings.Contains(string(p), `"tasks":{}`) || !strings.Contains(string(p), `"elicitation":{}`) {
		t.Fatalf("%s %v", p, err)
	}
}

// A tasks/list page decodes to its tasks (with their creation times, which
// adoption matches on) and the next cursor; a page that is not a list of
// valid tasks is refused whole.
func TestDecodeList(t *testing.T) {
	tasks, next, err := DecodeList(json.RawMessage(`{"tasks":[{"taskId":"a","status":"working","ttl":null,"createdAt":"2026-01-02T03:04:05Z","lastUpdatedAt":"2026-01-02T03:04:05Z"},{"taskId":"b","status":"completed","ttl":1000,"createdAt":"2026-01-02T03:04:06Z","lastUpdatedAt":"2026-01-02T03:04:07Z"}],"nextCursor":"p2"}`))
	if err != nil || next != "p2" || len(tasks) != 2 || tasks[0].TaskID != "a" || tasks[1].Status != model.StatusCompleted || tasks[1].CreatedAt.IsZero() {
		t.Fatalf("page: %v %q %+v", err, next, tasks)
	}
	for _, bad := range []string{`{"tasks":[{"status":"working"}]}`, `{"tasks":"a"}`, `[]`, `null`} {
		if _, _, err := DecodeList(json.RawMessage(bad)); !errors.Is(err, wire.ErrInvalid) {
			t.Fatalf("%s: %v; want ErrInvalid", bad, err)
		}
	}
}
