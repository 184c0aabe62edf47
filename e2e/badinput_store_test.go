package e2e

// Bad input that is the machine's, not the command's: a store that is
// not writable, damaged store files, a full disk. The tmpfs cases need
// root with CAP_SYS_ADMIN (mount); elsewhere they skip, saying why.

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/taskdeck/taskdeck/internal/clitest"
)

// mountTmpfs mounts a private tmpfs of size (e.g. "12m") and unmounts it
// when the test ends.
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size+",mode=0700", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs (%v: %s): this test needs root with CAP_SYS_ADMIN", err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	return dir
}

func remount(t *testing.T, dir, mode string) {
	t.Helper()
	if out, err := exec.Command("mount", "-o", "remount,"+mode, dir).CombinedOutput(); err != nil {
		t.Fatalf("remount %s %s: %v: %s", dir, mode, err, out)
	}
}

// seed makes n finished echo tasks and returns `ls --json` by id.
func seed(t *testing.T, d *deck, srv *demoServer, n int) map[string]task {
	t.Helper()
	for range n {
		clitest.OnlyID(t, d.run("call", "--url", srv.url, "echo", "--args", `{"text":"kept"}`).Must(t, 0))
	}
	tasks := d.lsByID()
	if len(tasks) != n {
		t.Fatalf("seeded %d tasks, ls shows %d", n, len(tasks))
	}
	return tasks
}

// sameTasks fails unless ls --json shows exactly the tasks of before, unchanged.
func sameTasks(t *testing.T, d *deck, before map[string]task) {
	t.Helper()
	after := d.lsByID()
	if len(after) != len(before) {
		t.Fatalf("%d tasks before, %d after", len(before), len(after))
	}
	for id, b := range before {
		a, ok := after[id]
		if !ok || a.Status != b.Status || a.resultText() != b.resultText() {
			t.Fatalf("task %s: before %+v, after %+v", id, b, a)
		}
	}
}

// TestStoreNotWritable: a store on a file system that turned read-only
// is refused in one line (exit 6), as is a new store there; nothing in it
// is lost.
func TestStoreNotWritable(t *testing.T) {
	t.Parallel()
	mnt := mountTmpfs(t, "32m")
	srv := startDemo(t, "127.0.0.1:0")
	d := newDeck(t)
	d.dataDir = filepath.Join(mnt, "data")
	before := seed(t, d, srv, 2)

	remount(t, mnt, "ro")
	for _, args := range [][]string{{"ls"}, {"call", "--url", srv.url, "echo"}, {"get", "x"}} {
		r := d.run(args...).Must(t, exitLocal)
		clitest.OneErrorLine(t, r, d.dataDir, "read-only file system")
	}
	r := runTD(t, d.env, "--data-dir", filepath.Join(mnt, "new"), "--config", d.config, "ls").Must(t, exitLocal)
	clitest.OneErrorLine(t, r, "cannot create data directory", "read-only file system")
	remount(t, mnt, "rw")
	sameTasks(t, d, before)
}

func storeFiles(t *testing.T, dir, suffix string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*"+suffix))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func flipBytes(t *testing.T, path string, from, step int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := from; i < len(b); i += step {
		b[i] ^= 0x55
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func truncateTo(t *testing.T, path string, size func(n int64) int64) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, size(fi.Size())); err != nil {
		t.Fatal(err)
	}
}

// TestDamagedStore: store files damaged after a clean close are refused
// in one "damaged" line (exit 6), again on a second try, and no file is
// deleted; a value log cut short loses nothing (records live in the LSM
// tree) and is read as before.
func TestDamagedStore(t *testing.T) {
	t.Parallel()
	srv := startDemo(t, "127.0.0.1:0")
	base := newDeck(t)
	before := seed(t, base, srv, 3)
	if len(storeFiles(t, base.dataDir, ".sst")) == 0 {
		t.Fatal("no table files after a clean close")
	}
	cases := []struct {
		name   string
		damage func(t *testing.T, dir string)
		want   string // "" when nothing is lost
	}{
		{"MANIFEST byte flipped", func(t *testing.T, dir string) {
			flipBytes(t, filepath.Join(dir, "MANIFEST"), 20, 1000)
		}, "manifest has checksum mismatch"},
		{"MANIFEST cut in half", func(t *testing.T, dir string) {
			truncateTo(t, filepath.Join(dir, "MANIFEST"), func(n int64) int64 { return n / 2 })
		}, "MANIFEST is cut short"},
		{"MANIFEST deleted", func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, "MANIFEST")); err != nil {
				t.Fatal(err)
			}
		}, "MANIFEST is missing"},
		{"MANIFEST garbage", func(t *testing.T, dir string) {
			if err := os.WriteFile(filepath.Join(dir, "MANIFEST"), []byte("not a manifest"), 0o600); err != nil {
				t.Fatal(err)
			}
		}, "manifest has bad magic"},
		{"table scrambled", func(t *testing.T, dir string) {
			for _, f := range storeFiles(t, dir, ".sst") {
				flipBytes(t, f, 100, 7)
			}
		}, ".sst"}, // Badger's checksum mismatch, or our footer check first
		{"table cut short", func(t *testing.T, dir string) {
			for _, f := range storeFiles(t, dir, ".sst") {
				truncateTo(t, f, func(int64) int64 { return 100 })
			}
		}, "is cut short"},
		{"table emptied", func(t *testing.T, dir string) {
			for _, f := range storeFiles(t, dir, ".sst") {
				truncateTo(t, f, func(int64) int64 { return 0 })
			}
		}, "is cut short (0 bytes)"},
		{"value log cut short", func(t *testing.T, dir string) {
			for _, f := range storeFiles(t, dir, ".vlog") {
				truncateTo(t, f, func(int64) int64 { return 10 })
			}
		}, ""},
		{"value log header scrambled", func(t *testing.T, dir string) {
			for _, f := range storeFiles(t, dir, ".vlog") {
				flipBytes(t, f, 0, 3)
			}
		}, "Invalid datakey id"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := newDeck(t)
			sparseCopy(t, base.dataDir, d.dataDir)
			c.damage(t, d.dataDir)
			if c.want == "" {
				sameTasks(t, d, before)
				return
			}
			tables := len(storeFiles(t, d.dataDir, ".sst"))
			for range 2 {
				r := d.run("ls", "--json").Must(t, exitLocal)
				clitest.OneErrorLine(t, r, "store "+d.dataDir+" is damaged: ", c.want, "move it aside")
				if r.Stdout != "" {
					t.Fatalf("a damaged store listed tasks\n%s", r)
				}
			}
			if got := len(storeFiles(t, d.dataDir, ".sst")); got != tables {
				t.Fatalf("%d table files before, %d after: the damaged store was changed", tables, got)
			}
		})
	}
}

// fill writes zeros to path until the file system is full.
// fullDisk is a deck whose store of 2 tasks sits on a 12 MiB tmpfs filled
// to the last block but for a 512 KiB reserve; freeReserve frees that.
func fullDisk(t *testing.T) (d *deck, srv *demoServer, mnt string, freeReserve func()) {
	t.Helper()
	mnt = mountTmpfs(t, "12m")
	srv = startDemo(t, "127.0.0.1:0")
	d = newDeck(t)
	d.dataDir = filepath.Join(mnt, "data")
	seed(t, d, srv, 2)
	reserve := filepath.Join(mnt, "reserve")
	if err := os.WriteFile(reserve, make([]byte, 512<<10), 0o600); err != nil {
		t.Fatal(err)
	}
	fill(t, filepath.Join(mnt, "filler"))
	return d, srv, mnt, func() {
		if err := os.Remove(reserve); err != nil {
			t.Fatal(err)
		}
	}
}

func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			return
		}
	}
}

// TestDiskFull: on a full disk taskdeck refuses in one line (exit 6); on
// a nearly full one a call still succeeds, the store is left unflushed
// with one warning (flushing could kill the process with SIGBUS, and
// Badger retries a failed flush forever), and every record is there once
// space is freed.
func TestDiskFull(t *testing.T) {
	t.Parallel()
	d, srv, mnt, freeReserve := fullDisk(t)

	for _, args := range [][]string{{"ls"}, {"call", "--url", srv.url, "echo"}} {
		r := d.run(args...).Must(t, exitLocal)
		clitest.OneErrorLine(t, r, d.dataDir, "no space left on device")
	}

	freeReserve() // nearly full: 512 KiB free
	r := d.run("call", "--url", srv.url, "echo", "--args", `{"text":"on a full disk"}`).Must(t, 0)
	clitest.OnlyID(t, r)
	clitest.OneErrorLine(t, r, "warning", "too little free disk space to flush the store", "free some space")
	r = d.run("ls", "--json").Must(t, 0)
	if n := strings.Count(r.Stdout, "\n"); n != 3 {
		t.Fatalf("%d tasks on the nearly full disk, want 3\n%s", n, r)
	}
	clitest.OneErrorLine(t, r, "warning", "too little free disk space")

	// Space freed: everything is there, and the store closes cleanly.
	if err := os.Remove(filepath.Join(mnt, "filler")); err != nil {
		t.Fatal(err)
	}
	r = d.run("ls", "--json").Must(t, 0)
	if r.Stderr != "" || !strings.Contains(r.Stdout, `"text":"on a full disk"`) || strings.Count(r.Stdout, "\n") != 3 {
		t.Fatalf("after freeing space\n%s", r)
	}
	d.run("ls").Must(t, 0)
}
