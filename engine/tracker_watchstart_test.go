package engine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/engine"

	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/internal/hostile"
	"github.com/taskdeck/taskdeck/mcpclient"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store"
)

// TestWatchAfterReconcilePollsEachTaskOnce: `taskdeck watch` reconciles
// (one tasks/get per open task) and then watches; the watch must wait for
// the poll the reconcile scheduled, not poll every task again at once.
// The server asks for 2 s between polls; in the first second after the
// reconcile's poll, no second tasks/get may arrive.
func TestWatchAfterReconcilePollsEachTaskOnce(t *testing.T) {
	h := hostile.Start(t, demo.Options{Speed: 0.05, PollInterval: 2 * time.Second})
	st, err := store.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	pool := mcpclient.NewPool(mcpclient.PoolOptions{})
	tr := engine.NewTracker(st, pool, engine.TrackerOptions{RequestTimeout: 5 * time.Second})
	t.Cleanup(func() {
		pool.Close()
		st.Close()
	})
	ref := model.ServerRef{URL: h.URL}
	var ids []string
	for range 3 {
		rec, _, err := tr.Call(context.Background(), engine.CallRequest{Server: ref, Tool: "sleep", Args: []byte(`{"seconds":600}`)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, rec.ID)
	}
	if _, err := tr.Reconcile(context.Background(), mcpclient.DefaultPerServer); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := tr.Watch(ctx, ids, engine.WatchOptions{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("watch ended early: %v", err)
	}
	perTask := map[string]int{}
	for _, r := range h.Requests("tasks/get") {
		perTask[r.TaskID]++
	}
	for _, id := range ids {
		taskID := ""
		if rec, err := st.Get(id); err == nil {
			taskID = rec.TaskID
		}
		if n := perTask[taskID]; n != 1 {
			t.Errorf("task %s: %d tasks/get in the reconcile and the first second of watch, want 1", id, n)
		}
	}
}
