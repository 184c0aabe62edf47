package badger

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/model"
)

// FuzzUnmarshalRecord holds the faster decoder to encoding/json: for any
// input, unmarshalRecord accepts exactly what encoding/json accepts and
// yields the same record (with an empty history as nil).
func FuzzUnmarshalRecord(f *testing.F) {
	rec := model.NewIntent(model.ServerRef{Name: "demo"}, "sleep", json.RawMessage(`{"seconds": 5, "s":"\u00e9\n"}`), "key", time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	_ = rec.MoveTo(model.StatusWorking, "started", rec.CreatedAt.Add(time.Second))
	ttl := int64(60000)
	rec.TTLMs = &ttl
	rec.InputRequests = map[string]model.InputRequest{"a": {Method: "elicitation/create", Params: json.RawMessage(`{"message":"name?"}`)}}
	rec.Error = &model.RPCError{Code: -32603, Message: "boom", Data: json.RawMessage(`[1,2]`)}
	good, _ := json.Marshal(rec)
	f.Add(good)
	f.Add([]byte(`{"id":"x","status":"working","history":[{"at":"2026-11-30T12:00:00Z","to":"calling"}]}`))
	f.Add([]byte(`{"id":"x","tool":"\xff","arguments":{"a":1} }`))
	f.Add([]byte(`{"id":"x"} trailing`))
	f.Add([]byte(`{"id":"x","ttlMs":1.5}`))
	f.Add([]byte(`{"id":"x","revision":18446744073709551615}`))
	f.Add([]byte(`{"id":"x","arguments":{"a":{"at":1}},"history":[]}`))
	f.Add([]byte(`{"id":"x","history":[{"at":"2026-11-30T12:00:00Z","to":"calling"},{"at":"2026-11-30T12:00:01Z","to":"working"},{"at":"2026-11-30T12:00:02Z","to":"failed"}],"arguments":{"at":0}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var want, got model.Task
		wantErr := json.Unmarshal(data, &want)
		if len(want.History) == 0 {
			want.History = nil
		}
		gotErr := unmarshalRecord(data, &got)
		if (wantErr == nil) != (gotErr == nil) {
			t.Fatalf("encoding/json: %v, unmarshalRecord: %v, for %q", wantErr, gotErr, data)
		}
		if wantErr == nil && !reflect.DeepEqual(want, got) {
			t.Fatalf("records differ for %q:\nencoding/json  %+v\nunmarshalRecord %+v", data, want, got)
		}
	})
}
