package proxy

import (
	"context"
	"strings"
	"testing"

	"github.com/taskdeck/taskdeck/deck"
)

// An agent's idempotency key, from its _meta or its Idempotency-Key
// header, finds the first task: the same task id, which tasks/get reads,
// and nothing sent again. It is the agent's own: another agent's same
// key is another call. The same key with other arguments, two different
// keys at once and a key that is not short printable text are refused.
func TestIdempotencyKeyFindsTheFirstTask(t *testing.T) {
	r, _ := twoAgents(t)
	call := func(token, key, args string, hdr map[string]string) answer {
		t.Helper()
		m := metaJSON("retrier", true)
		if key != "" {
			m = strings.TrimSuffix(m, "}") + `,"io.taskdeck/idempotencyKey":` + quote(key) + `}`
		}
		h := as(token)
		for k, v := range hdr {
			h[k] = v
		}
		_, a := rpc(t, r.url, "tools/call", `{"name":"sleep","arguments":`+args+`,"_meta":`+m+`}`, h)
		return a
	}
	first := call(tokenA, "run-1", `{"seconds":600}`, nil)
	if first.Error != nil || str(first.Result["resultType"]) != "task" {
		t.Fatalf("the first call: %+v", first)
	}
	id := str(first.Result["taskId"])
	again := call(tokenA, "", `{"seconds":600}`, map[string]string{"Idempotency-Key": "run-1"})
	if again.Error != nil || str(again.Result["taskId"]) != id {
		t.Fatalf("the retry by header was given %+v, want task %s", again, id)
	}
	if got := taskReq(t, r, tokenA, "tasks/get", id); !strings.Contains(got, `"working"`) {
		t.Fatalf("tasks/get of the retried task id: %s", got)
	}
	other := call(tokenB, "run-1", `{"seconds":600}`, nil)
	if other.Error != nil || str(other.Result["taskId"]) == id {
		t.Fatalf("another agent's same key was given %+v", other)
	}
	for _, c := range []struct {
		name, key, args string
		hdr             map[string]string
		want            string
	}{
		{"other arguments", "run-1", `{"seconds":601}`, nil, "run-1"},
		{"two keys", "run-1", `{"seconds":600}`, map[string]string{"Idempotency-Key": "run-2"}, "differ; send one key"},
		{"a control character", "run\x01", `{"seconds":600}`, nil, "printable text of at most 200 bytes"},
		{"too long", strings.Repeat("k", 201), `{"seconds":600}`, nil, "printable text of at most 200 bytes"},
	} {
		if a := call(tokenA, c.key, c.args, c.hdr); a.Error == nil || !strings.Contains(a.Error.Message, c.want) {
			t.Errorf("%s: %+v, want an error with %q", c.name, a, c.want)
		}
	}
	if list, err := r.eng.List(context.Background(), deck.Filter{}); err != nil || len(list) != 2 {
		t.Fatalf("%d records (%v), want agent a's and agent b's", len(list), err)
	}
	if n := len(r.srv.Requests("tools/call")); n != 2 {
		t.Fatalf("the server got %d tools/call, want 2 (one per agent)", n)
	}
}
