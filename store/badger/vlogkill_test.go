//go:build unix

package badger_test

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/internal/waitfor"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store/badger"
)

// helperGCEnv names the store dir of TestHelperRewritesLargeRecords.
const helperGCEnv = "TASKDECK_STORE_HELPER_GC_DIR"

// The helper's records, each with 200 KB of arguments, which live in the
// value log under a key of their own, written once: the first gcRewritten
// also hold a 200 KB pending answer, so that every round's rewrite of them
// goes to the value log too, and a value-log GC has the arguments to move
// out of a file of garbage. gcArgs is record i's arguments (and, past
// gcRecords, an answer), the same in every process.
const gcRecords, gcRewritten = 6, 4

func gcArgs(i int) json.RawMessage {
	b := make([]byte, 150<<10)
	r := rand.New(rand.NewPCG(uint64(i), 20))
	for j := range b {
		b[j] = byte(r.Uint32())
	}
	args, _ := json.Marshal(map[string]string{"blob": base64.StdEncoding.EncodeToString(b)})
	return args
}

// TestValueLogGCSurvivesKills: a child rewrites four records of 200 KB,
// which live in the value log beside the arguments of six, until the
// store reclaims the value log; the child is
// SIGKILLed (by its pid) as the reclaim flattens the tree or as it starts
// a value-log GC, which moves the live values to a new file and deletes the
// old one. Eight kills in a row, alternating the two: after each, the store
// opens with every record, its arguments whole and its message no older
// than the last round the child had committed before the step.
func TestValueLogGCSurvivesKills(t *testing.T) {
	dir := t.TempDir()
	for kill := range 8 {
		step := []string{"flatten", "vlog-gc"}[kill%2]
		pid, rounds := killAtStep(t, dir, step)
		s, err := badger.Open(dir, nil)
		if err != nil {
			t.Fatalf("kill %d (at %s): the store does not open: %v", kill, step, err)
		}
		recs, err := s.OpenTasks()
		must(t, err)
		if len(recs) != gcRecords {
			t.Fatalf("kill %d (at %s): %d records, want %d", kill, step, len(recs), gcRecords)
		}
		for _, rec := range recs {
			i, err := strconv.Atoi(rec.IdempotencyKey)
			must(t, err)
			if string(rec.Arguments) != string(gcArgs(i)) {
				t.Fatalf("kill %d (at %s): record %s: arguments changed (%d bytes)", kill, step, rec.ID, len(rec.Arguments))
			}
			if i >= gcRewritten {
				continue
			}
			if a := rec.PendingAnswers["form"]; string(a) != string(gcArgs(gcRecords+i)) {
				t.Fatalf("kill %d (at %s): record %s: pending answer changed (%d bytes)", kill, step, rec.ID, len(a))
			}
			var gotPID, round int
			if _, err := fmt.Sscanf(rec.StatusMessage, "child %d round %d", &gotPID, &round); err != nil || gotPID != pid || round < rounds-1 {
				t.Fatalf("kill %d (at %s) after %d rounds of pid %d: record %s says %q", kill, step, rounds, pid, rec.ID, rec.StatusMessage)
			}
		}
		must(t, s.Close())
	}
}

// killAtStep runs the helper on dir until it reports step, and SIGKILLs it
// then: its pid, and the rounds it had committed before the step.
func killAtStep(t *testing.T, dir, step string) (pid, rounds int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperRewritesLargeRecords$")
	cmd.Env = append(os.Environ(), helperGCEnv+"="+dir)
	out, err := cmd.StdoutPipe()
	must(t, err)
	must(t, cmd.Start())
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	deadline := time.After(waitfor.Scale(2 * time.Minute))
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("the helper ended before a reclaim's %s", step)
			}
			var name string
			if _, err := fmt.Sscanf(l, "%s %d", &name, &rounds); err != nil {
				t.Fatalf("helper said %q", l)
			}
			if name != step {
				continue
			}
			must(t, cmd.Process.Kill())
			_ = cmd.Wait()
			return cmd.Process.Pid, rounds
		case <-deadline:
			t.Fatalf("no reclaim's %s in %s", step, waitfor.Scale(2*time.Minute))
		}
	}
}

// TestHelperRewritesLargeRecords is the child of
// TestValueLogGCSurvivesKills: it rewrites the first gcRewritten records
// each round, until it is killed, and prints each compaction step of a
// reclaim with the rounds committed before it.
func TestHelperRewritesLargeRecords(t *testing.T) {
	dir := os.Getenv(helperGCEnv)
	if dir == "" {
		t.Skip("helper process for TestValueLogGCSurvivesKills")
	}
	s, err := badger.Open(dir, nil)
	must(t, err)
	var rounds atomic.Int64
	var out sync.Mutex // the reclaim's goroutine prints, the writers go on
	badger.OnCompact(s, func(step string) {
		out.Lock()
		defer out.Unlock()
		fmt.Println(step, rounds.Load())
	})
	recs, err := s.OpenTasks()
	must(t, err)
	for i := len(recs); i < gcRecords; i++ {
		rec := model.NewIntent(model.ServerRef{Name: "s"}, "tool", gcArgs(i), strconv.Itoa(i), t0)
		rec.TaskID = "srv-" + rec.ID
		must(t, rec.MoveTo(model.StatusWorking, "", t0))
		if i < gcRewritten {
			rec.PendingAnswers = map[string]json.RawMessage{"form": gcArgs(gcRecords + i)}
		}
		must(t, s.Create(rec))
		recs = append(recs, rec)
	}
	for round := 0; ; round++ {
		var wg sync.WaitGroup
		for _, rec := range recs {
			if i, _ := strconv.Atoi(rec.IdempotencyKey); i >= gcRewritten {
				continue
			}
			wg.Go(func() {
				_, err := s.Update(rec.ID, func(r *model.Task) (bool, error) {
					msg := fmt.Sprintf("child %d round %d", os.Getpid(), round)
					return r.Apply(model.Snapshot{TaskID: r.TaskID, Status: model.StatusWorking, StatusMessage: msg}, time.Now())
				})
				if err != nil {
					fmt.Println("error", strings.ReplaceAll(err.Error(), "\n", " "))
					os.Exit(1)
				}
			})
		}
		wg.Wait()
		rounds.Store(int64(round + 1))
	}
}
