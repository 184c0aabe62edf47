package wire

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/taskdeck/taskdeck/model"
)

// hostile is server text carrying terminal escapes, C1 controls, bidi
// overrides and NUL, for seed corpora.
const hostile = "\x1b]0;pwned\x07\x1b[2J\x1b]52;c;ZXZpbA==\x07\x9b31m\u202eetoh\x00 ok\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\"

func hostileJSON() string { b, _ := json.Marshal(hostile); return string(b) }

// oneLineErr fails unless err's text is a single line.
func oneLineErr(t *testing.T, err error) {
	t.Helper()
	if strings.ContainsAny(err.Error(), "\r\n") {
		t.Fatalf("error is not one line: %q", err)
	}
}

// checkSnapshot: a decoded task always has an id and a server status.
func checkSnapshot(t *testing.T, s *model.Snapshot) {
	t.Helper()
	if s == nil {
		t.Fatal("nil snapshot without an error")
	}
	if s.TaskID == "" {
		t.Fatal("decoded a task without a taskId")
	}
	if _, ok := model.ServerStatus(string(s.Status)); !ok {
		t.Fatalf("decoded a task with status %q", s.Status)
	}
}

func FuzzDecodeCallResult(f *testing.F) {
	h := hostileJSON()
	for _, seed := range []string{
		specHandle,
		`{"resultType":"complete","content":[{"type":"text","text":"Hello"}],"isError":false}`,
		`{"content":[{"type":"text","text":` + h + `}],"isError":true}`,
		`{"resultType":"input_required","inputRequests":` + specInputRequests + `,"requestState":"abc"}`,
		`{"resultType":"input_required"}`,
		`{"resultType":"task","taskId":"","status":"working"}`,
		`{"resultType":"task","taskId":` + h + `,"status":` + h + `}`,
		`{"resultType":"task","taskId":"t","status":"working","ttlMs":null,"pollIntervalMs":-5,"createdAt":"yesterday"}`,
		`{"resultType":` + h + `}`,
		`null`, `[]`, `"task"`, `{`, `{"resultType":7}`, "{\"resultType\":\"task\",\"taskId\":\"\\u0000\",\"status\":\"working\"}",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		out, err := DecodeCallResult(raw)
		if err != nil {
			oneLineErr(t, err)
			return
		}
		n := 0
		if out.Result != nil {
			n++
			if out.ResultType != ResultTypeComplete || !json.Valid(out.Result) {
				t.Fatalf("complete outcome %q with result %q", out.ResultType, out.Result)
			}
		}
		if out.Task != nil {
			n++
			checkSnapshot(t, out.Task)
		}
		if out.InputRequests != nil || out.RequestState != "" {
			n++
		}
		if n != 1 {
			t.Fatalf("outcome %+v carries %d of result, task, input requests; want exactly one", out, n)
		}
	})
}

func FuzzDecodeTask(f *testing.F) {
	h := hostileJSON()
	for _, seed := range []string{
		specGetWorking, specGetCompleted, specGetFailed,
		`{"resultType":"complete","taskId":"a","status":"input_required","inputRequests":` + specInputRequests + `}`,
		`{"resultType":"complete","taskId":"a","status":"completed","result":null}`,
		`{"resultType":"complete","taskId":"a","status":"completed","result":"x"}`,
		`{"resultType":"complete","taskId":"a","status":"failed"}`,
		`{"resultType":"task","taskId":"a","status":"cancelled","statusMessage":` + h + `}`,
		`{"taskId":"a","status":"completed","result":{"content":[{"type":"text","text":` + h + `}]},"error":{"code":1,"message":` + h + `}}`,
		`{"resultType":"complete","taskId":"a","status":"calling"}`,
		`{"resultType":"complete","taskId":"a","status":"unknown"}`,
		`{"resultType":"other","taskId":"a","status":"working"}`,
		`{"resultType":"complete","status":"working"}`,
		`{"taskId":"a","status":"input_required","inputRequests":{"k":{"method":` + h + `,"params":[]}}}`,
		`null`, `{}`, `[`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var r GetTaskResult
		if err := json.Unmarshal(raw, &r); err != nil {
			return // go-sdk reports this one as a JSON-RPC decoding error
		}
		snap, err := DecodeTask(&r)
		if err != nil {
			oneLineErr(t, err)
			return
		}
		checkSnapshot(t, snap)
		switch snap.Status {
		case model.StatusCompleted:
			if !json.Valid(snap.Result) || !isObject(snap.Result) {
				t.Fatalf("completed task with result %q", snap.Result)
			}
		case model.StatusFailed:
			if snap.Error == nil {
				t.Fatal("failed task without an error")
			}
		}
	})
}
