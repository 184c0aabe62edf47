package e2e

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/taskdeck/taskdeck/internal/clitest"
	"github.com/taskdeck/taskdeck/internal/pgtest"
)

// TestSameKeyFromTwoHosts: two hosts (two data directories, two
// processes) on one PostgreSQL database run `taskdeck call --key K` at
// the same moment, round after round. As with two shells on one Badger
// store: the server runs one task per key, both commands exit 0 and print
// the same record id, and the one that did not launch says so in one line.
func TestSameKeyFromTwoHosts(t *testing.T) {
	t.Parallel()
	t.Run("badger, two shells", func(t *testing.T) {
		t.Parallel()
		d := newDeck(t)
		sameKeyRounds(t, func(srvURL string) (*deck, *deck) {
			d.writeConfig(fmt.Sprintf(`{"mcpServers":{"demo":{"url":%q}}}`, srvURL))
			return d, d
		})
	})
	t.Run("postgres, two hosts", func(t *testing.T) {
		t.Parallel()
		db := pgtest.DB(t)
		sameKeyRounds(t, func(srvURL string) (*deck, *deck) {
			a, b := newDeck(t), newDeck(t)
			for _, d := range []*deck{a, b} {
				d.writeConfig(fmt.Sprintf(`{"store":%q,"mcpServers":{"demo":{"url":%q}}}`, db, srvURL))
			}
			return a, b
		})
	})
}

// sameKeyRounds starts the two decks' `call --key` at once, a fresh key
// each round, and checks each round and the server's count.
func sameKeyRounds(t *testing.T, decks func(srvURL string) (*deck, *deck)) {
	rounds := 20
	if testing.Short() {
		rounds = 6
	}
	srv := startDemo(t, "127.0.0.1:0")
	a, b := decks(srv.url)
	for r := range rounds {
		key := fmt.Sprintf("K_%d", r)
		// 10 demo seconds: open for 0.5 s, so the record each prints
		// without --wait is the running task's. With --wait, the one that
		// did not launch follows the other's call, which may be still
		// `calling`, to its end.
		args := []string{"call", "--server", "demo", "sleep", "--args", `{"seconds":10}`, "--key", key}
		wait := r%4 >= 2 // either host first, with and without --wait
		if wait {
			args = append(args, "--wait", "--json")
		}
		first, second := a, b
		if r%2 == 1 { // neither host always starts first
			first, second = b, a
		}
		p, q := first.start(args...), second.start(args...)
		var ids []string
		launched := 0
		for _, pr := range []*proc{p, q} {
			clitest.WaitFor(t, "both calls to exit", pr.exited)
			out, errOut := pr.Stdout.String(), pr.Stderr.String()
			if pr.Code != exitOK {
				t.Fatalf("round %d: call --key %s exited %d\nstdout: %s\nstderr: %s", r, key, pr.Code, out, errOut)
			}
			id := strings.TrimSpace(out)
			if wait {
				// Each change as a JSON line, the last the completed task.
				lines := strings.Split(id, "\n")
				last := parseTask(t, lines[len(lines)-1])
				if last.Status != "completed" {
					t.Fatalf("round %d: call --wait ended with %+v\n%s", r, last, out)
				}
				id = last.ID
			} else if strings.Contains(id, "\n") || id == "" {
				t.Fatalf("round %d: call printed %q, want one record id", r, out)
			}
			ids = append(ids, id)
			// A call that found the store changing hands says it waits:
			// that line is no word about the key.
			errOut = waitingLine.ReplaceAllString(errOut, "")
			switch lines := strings.Count(errOut, "\n"); {
			case errOut == "":
				launched++
			case lines == 1 && strings.Contains(errOut, "nothing new was sent") && strings.Contains(errOut, id):
			default:
				t.Fatalf("round %d: the call that did not launch said %q, want one line naming %s", r, errOut, id)
			}
		}
		if ids[0] != ids[1] {
			t.Fatalf("round %d: the two calls with key %s printed %s and %s, want one record", r, key, ids[0], ids[1])
		}
		if launched != 1 {
			t.Fatalf("round %d: %d of the two calls said nothing about the key, want exactly one (the launch)", r, launched)
		}
	}
	st := srv.stats(t)
	if st.TasksCreated != rounds || st.ToolCalls["sleep"] != rounds {
		t.Fatalf("the server created %d tasks from %d tools/call for %d keys, want one each", st.TasksCreated, st.ToolCalls["sleep"], rounds)
	}
	recs := a.ls()
	if len(recs) != rounds {
		t.Fatalf("%d records for %d keys", len(recs), rounds)
	}
	t.Logf("%d rounds (half with --wait): one server task each, both calls printed its record", rounds)
}

// waitingLine is what a command prints while the store changes hands.
var waitingLine = regexp.MustCompile(`(?m)^taskdeck: waiting for the store .*\n`)
