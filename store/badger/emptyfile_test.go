package badger_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store/badger"
)

// TestOpenAfterKillDuringFileCreation: a process killed between Badger's
// creating its next memtable (or value-log) file and sizing it leaves a
// 0-byte file (seen in the crash storm, storm_test.go). Badger's Open
// fails on each such file once (dgraph-io/badger#2207), and every Open
// creates a new memtable and a new value log, so kills of successive
// processes can leave more than one; the store must open anyway, with
// every record.
func TestOpenAfterKillDuringFileCreation(t *testing.T) {
	// Badger names memtables with 5 digits, value logs with 6.
	digits := map[string]string{".mem": "%05d", ".vlog": "%06d"}
	for name, empty := range map[string][]string{
		"mem":          {".mem"},
		"vlog":         {".vlog"},
		"mem and vlog": {".mem", ".vlog"},
		"two vlogs":    {".vlog", ".vlog"},
		"two of each":  {".mem", ".vlog", ".mem", ".vlog"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			s := openStore(t, dir)
			a := create(t, s, "a", model.StatusWorking, t0)
			must(t, s.Close())

			// The kills' leftovers: the next files, created and empty.
			for _, ext := range empty {
				entries, err := os.ReadDir(dir)
				must(t, err)
				next := 0
				for _, e := range entries {
					if fid, ok := strings.CutSuffix(e.Name(), ext); ok {
						n, err := strconv.Atoi(fid)
						must(t, err)
						next = max(next, n+1)
					}
				}
				must(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf(digits[ext], next)+ext), nil, 0o600))
			}

			s, err := badger.Open(dir, nil)
			if err != nil {
				t.Fatalf("the store does not open after kills left empty %v files: %v", empty, err)
			}
			defer s.Close()
			got, err := s.Get(a.ID)
			if err != nil || got.IdempotencyKey != "a" {
				t.Fatalf("record after reopening: %+v, %v", got, err)
			}
		})
	}
}
