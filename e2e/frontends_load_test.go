package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	tdeck "github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/internal/clitest"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/service"
)

// TestThreeShellsTheDashboardAndAGoProgram: three shells running `call`
// one after another, and a Go program calling through the library, on one
// store the dashboard owns: 300 calls, each with its own key. Every call
// exits 0 (never 4), every handle is recorded, and the server made one
// task per key.
func TestThreeShellsTheDashboardAndAGoProgram(t *testing.T) {
	t.Parallel()
	const shells, perShell, byLibrary = 3, 80, 60
	d, srv := tuiDeck(t)
	tm := d.dashboard(120, 30)
	clitest.WaitFor(t, "the dashboard to own the store", func() bool {
		_, err := os.Lstat(filepath.Join(d.dataDir, "taskdeck.sock"))
		return err == nil
	})

	lib, err := service.Open(t.Context(), service.Options{DataDir: d.dataDir})
	if err != nil {
		t.Fatalf("the library's Open: %v", err)
	}
	defer lib.Close()
	if lib.Owner() {
		t.Fatal("the Go program owns the store; the dashboard should")
	}

	start := time.Now()
	var wg sync.WaitGroup
	failed := make(chan string, shells*perShell+byLibrary)
	for sh := range shells {
		wg.Go(func() {
			for n := range perShell {
				key := fmt.Sprintf("shell%d-%d", sh, n)
				r := runTD(t, d.env, d.args([]string{"call", "--server", "demo", "sleep", "--args", `{"seconds":1}`, "--key", key})...)
				if r.Code != exitOK {
					failed <- r.String()
					return
				}
			}
		})
	}
	wg.Go(func() {
		for n := range byLibrary {
			req := tdeck.CallRequest{Server: model.ServerRef{Name: "demo"}, Tool: "sleep", Args: json.RawMessage(`{"seconds":1}`), Key: fmt.Sprintf("lib-%d", n)}
			if _, err := lib.Call(t.Context(), req); err != nil {
				failed <- fmt.Sprintf("the library's call %d: %v", n, err)
				return
			}
		}
	})
	wg.Wait()
	close(failed)
	for f := range failed {
		t.Fatal(f)
	}
	t.Logf("%d calls in %v", shells*perShell+byLibrary, time.Since(start).Round(time.Millisecond))

	keys := map[string]int{}
	for _, tk := range d.ls() {
		if tk.TaskID == "" {
			t.Fatalf("a record without a handle: %+v", tk)
		}
		keys[tk.Key]++
	}
	want := shells*perShell + byLibrary
	if len(keys) != want {
		t.Fatalf("%d keys recorded, want %d", len(keys), want)
	}
	for k, n := range keys {
		if n != 1 {
			t.Fatalf("key %s on %d records", k, n)
		}
	}
	st := srv.stats(t)
	if st.TasksCreated != want || st.ToolCalls["sleep"] != want {
		t.Fatalf("the server made %d tasks from %d sleep calls, want %d of each", st.TasksCreated, st.ToolCalls["sleep"], want)
	}
	tm.quit()
}
