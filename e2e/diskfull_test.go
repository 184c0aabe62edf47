package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/taskdeck/taskdeck/internal/clitest"
)

// TestDiskFilledAfterTheStore: a disk that fills once the store exists
// must not kill taskdeck with SIGBUS. Badger maps its files sparse: a
// store to an unbacked page of a mapping on a full disk is a SIGBUS that
// no Go code can recover. Every command then ends with one line saying
// the disk is full (exit 6), and once space is freed every record is there.
func TestDiskFilledAfterTheStore(t *testing.T) {
	t.Parallel()
	d, srv, mnt, freeReserve := fullDisk(t)

	// Nearly full: a call works, and its record stays in the WAL unflushed.
	freeReserve()
	clitest.OnlyID(t, d.run("call", "--url", srv.url, "echo", "--args", `{"text":"in the WAL"}`).Must(t, 0))

	// Then the disk fills to the last block.
	fill(t, filepath.Join(mnt, "filler2"))
	for _, args := range [][]string{{"ls", "--json"}, {"ls"}, {"call", "--url", srv.url, "echo"}} {
		r := d.run(args...)
		if r.Code != exitLocal {
			t.Fatalf("want exit %d on a full disk\n%s", exitLocal, r)
		}
		clitest.OneErrorLine(t, r, d.dataDir, "disk is full")
	}

	for _, f := range []string{"filler", "filler2"} {
		if err := os.Remove(filepath.Join(mnt, f)); err != nil {
			t.Fatal(err)
		}
	}
	r := d.run("ls", "--json").Must(t, 0)
	if n := strings.Count(r.Stdout, "\n"); n != 3 || r.Stderr != "" || !strings.Contains(r.Stdout, "in the WAL") {
		t.Fatalf("after freeing space, want the 3 tasks\n%s", r)
	}
}
