package engine

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/taskdeck/taskdeck/internal/hostile"
	"github.com/taskdeck/taskdeck/mcpclient"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store"
)

// A handle seeded cancelled is complete as it is: cancelled carries no
// result or error (spec §4), so it is stored cancelled at once and no
// tasks/get is sent for a payload that does not exist.
func TestCancelledSeedIsStoredCancelled(t *testing.T) {
	e, h := newHostileEnv(t)
	h.On("tools/call", h.Rewrite(hostile.Set(map[string]string{"status": `"cancelled"`})))
	rec, _, err := tupled(e.tracker.Call(context.Background(), callRequest{Server: e.ref, Tool: "sleep", Args: json.RawMessage(`{"seconds":60}`)}))
	if err != nil {
		t.Fatal(err)
	}
	got := e.stored(rec.ID)
	if rec.Status != model.StatusCancelled || got.Status != model.StatusCancelled || got.TaskID == "" {
		t.Fatalf("a handle seeded cancelled: returned %s, stored %s %q; want cancelled with its handle", rec.Status, got.Status, got.StatusMessage)
	}
	if n := len(h.Requests("tasks/get")); n != 0 {
		t.Fatalf("%d tasks/get for a cancelled seed, want none", n)
	}
}

// A cancel answered -32602 whose confirming tasks/get fails is no
// success: the task may run on, and the error says so on one line.
func TestRefusedCancelWhoseCheckFailsIsAnError(t *testing.T) {
	e, h := newHostileEnv(t)
	rec := e.call("sleep", `{"seconds":60}`, "")
	h.On("tasks/cancel", hostile.Error(-32602, "Failed to retrieve task: Task not found"))
	h.On("tasks/get", hostile.Busy("0"))
	got, err := e.tracker.Cancel(context.Background(), rec.ID)
	if err == nil {
		t.Fatalf("cancel answered -32602, tasks/get 503: no error, record %s; want an error", got.Status)
	}
	msg := err.Error()
	if !strings.Contains(msg, "refused the cancel") || !strings.Contains(msg, "could not be checked") || strings.Contains(msg, "\n") {
		t.Fatalf("error %q; want one line saying the cancel was refused and the state could not be checked", msg)
	}
	if st := e.stored(rec.ID); st.Status != model.StatusWorking || st.CancelRequested {
		t.Fatalf("stored %s cancel-requested=%v; want the record unchanged", st.Status, st.CancelRequested)
	}
}

// A refused call releases its key for the corrected call, and that call
// is checked against the tool's schema like any other, before anything is
// sent; a key that names a live task answers for itself (a conflict).
func TestCorrectedCallUnderARefusedKeyIsChecked(t *testing.T) {
	e, h := newHostileEnv(t)
	h.On("tools/call", hostile.Error(-32602, "invalid params"))
	if _, _, err := tupled(e.tracker.Call(context.Background(), callRequest{Server: e.ref, Tool: "sleep", Args: json.RawMessage(`{"seconds":1}`), Key: "k"})); err == nil {
		t.Fatal("the refused call succeeded")
	}
	h.On("tools/call", nil)
	sent := len(h.Requests("tools/call"))
	bad := callRequest{Server: e.ref, Tool: "sleep", Args: json.RawMessage(`{"seconds":"x"}`), Key: "k"}
	var ce *mcpclient.CallError
	if _, _, err := tupled(e.tracker.Call(context.Background(), bad)); !errors.As(err, &ce) {
		t.Fatalf("Call of seconds \"x\" under a refused call's key: %v; want the schema's refusal", err)
	}
	if n := len(h.Requests("tools/call")) - sent; n != 0 {
		t.Fatalf("%d tools/call sent for a call the schema refuses, want none", n)
	}
	e.call("sleep", `{"seconds":60}`, "live")
	bad.Key = "live"
	var kc *keyConflictError
	if _, _, err := tupled(e.tracker.Call(context.Background(), bad)); !errors.As(err, &kc) {
		t.Fatalf("Call under a live task's key with other arguments: %v; want a key conflict", err)
	}
}

// Releasing a refused call's key rewrites its record in one commit: a
// reader meanwhile never finds the refusal gone, and it stays on record,
// without the key.
func TestKeyReleaseKeepsTheRefusalReadable(t *testing.T) {
	e, h := newHostileEnv(t)
	h.On("tools/call", hostile.Error(-32602, "invalid params"))
	refused, _, err := tupled(e.tracker.Call(context.Background(), callRequest{Server: e.ref, Tool: "sleep", Args: json.RawMessage(`{"seconds":1}`), Key: "k"}))
	if err == nil {
		t.Fatal("the refused call succeeded")
	}
	h.On("tools/call", nil)
	var vanished atomic.Bool
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := e.store.Get(refused.ID); errors.Is(err, store.ErrNotFound) {
				vanished.Store(true)
			}
		}
	})
	rec := e.call("sleep", `{"seconds":60}`, "k")
	close(stop)
	wg.Wait()
	if vanished.Load() {
		t.Error("the refused call's record vanished while its key was released")
	}
	if got := e.stored(refused.ID); got.IdempotencyKey != "" || got.Status != model.StatusFailed {
		t.Fatalf("the refusal after release: key %q status %s; want failed without the key", got.IdempotencyKey, got.Status)
	}
	if byKey, err := e.store.ByKey("k"); err != nil || byKey.ID != rec.ID {
		t.Fatalf("key k names %v (%v), want the corrected call", byKey, err)
	}
}
