package badger_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/internal/waitfor"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store"
	"github.com/taskdeck/taskdeck/store/badger"
)

func assertOneLine(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		t.Fatal("want an error, got nil")
	}
	if msg := err.Error(); msg == "" || strings.ContainsAny(msg, "\r\n") {
		t.Fatalf("error is not one line: %q", msg)
	}
}

func TestReopenKeepsEverything(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	a := create(t, s, "a", model.StatusWorking, t0)
	b := create(t, s, "", model.StatusInputRequired, t0)
	c := create(t, s, "c", model.StatusCompleted, t0)
	_, err := s.Update(a.ID, func(t *model.Task) (bool, error) {
		t.TaskID = "srv-a"
		return true, nil
	})
	must(t, err)
	must(t, s.Close())

	s = openStore(t, dir)
	got, err := s.Get(a.ID)
	must(t, err)
	if got.TaskID != "srv-a" || got.Status != model.StatusWorking {
		t.Fatalf("after reopen, a = %+v", got)
	}
	if k, err := s.ByKey("c"); err != nil || k.ID != c.ID {
		t.Fatalf("after reopen, ByKey(c) = %v, %v", k, err)
	}
	open, err := s.OpenTasks()
	must(t, err)
	if fmt.Sprint(ids(open)) != fmt.Sprint(sortedIDs(a, b)) {
		t.Fatalf("after reopen, OpenTasks = %v, want %v", ids(open), sortedIDs(a, b))
	}
	counts, err := s.Counts()
	must(t, err)
	if counts[model.StatusWorking] != 1 || counts[model.StatusInputRequired] != 1 || counts[model.StatusCompleted] != 1 {
		t.Fatalf("after reopen, Counts = %v", counts)
	}
	if s.Dir() != dir {
		t.Fatalf("Dir() = %q, want %q", s.Dir(), dir)
	}
}

func checkModes(t *testing.T, dir string) {
	t.Helper()
	fi, err := os.Stat(dir)
	must(t, err)
	if fi.Mode().Perm() != 0o700 {
		t.Errorf("store dir mode %v, want 0700", fi.Mode().Perm())
	}
	entries, err := os.ReadDir(dir)
	must(t, err)
	if len(entries) == 0 {
		t.Fatal("store dir is empty")
	}
	for _, e := range entries {
		fi, err := e.Info()
		must(t, err)
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s mode %v, want 0600", e.Name(), fi.Mode().Perm())
		}
	}
}

func TestPermissions(t *testing.T) {
	// With no umask, Badger's files would be 0666 and a plain MkdirAll
	// 0700 only by luck of the argument: the store must not depend on it.
	old := syscall.Umask(0)
	defer syscall.Umask(old)

	dir := filepath.Join(t.TempDir(), "data", "store")
	s := openStore(t, dir)
	for range 20 {
		create(t, s, "", model.StatusWorking, t0)
	}
	checkModes(t, dir)
	must(t, s.Close()) // Close writes table files
	checkModes(t, dir)
}

func TestTightensWideDir(t *testing.T) {
	for _, mode := range []fs.FileMode{0o755, 0o777, 0o750} {
		dir := filepath.Join(t.TempDir(), "store")
		must(t, os.Mkdir(dir, 0o700))
		must(t, os.Chmod(dir, mode))
		s := openStore(t, dir)
		must(t, s.Close())
		checkModes(t, dir)
	}
}

func TestNotWritableDir(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root can write to a 0500 directory; TestParentIsAFile covers a failure root meets")
	}
	dir := t.TempDir()
	must(t, os.Chmod(dir, 0o500))
	t.Cleanup(func() { _ = os.Chmod(dir, 0o700) })
	_, err := badger.Open(dir, nil)
	assertOneLine(t, err)
	if !errors.Is(err, fs.ErrPermission) || !strings.Contains(err.Error(), "not writable") {
		t.Fatalf("Open of a 0500 dir: %v, want a not-writable permission error", err)
	}
}

func TestParentIsAFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	must(t, os.WriteFile(file, []byte("x"), 0o600))
	_, err := badger.Open(filepath.Join(file, "store"), nil)
	assertOneLine(t, err)
	if !strings.Contains(err.Error(), "not a directory") || !strings.Contains(err.Error(), "--data-dir") {
		t.Fatalf("Open under a file: %v", err)
	}
}

func TestStoreIsAFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	must(t, os.WriteFile(file, []byte("x"), 0o600))
	_, err := badger.Open(file, nil)
	assertOneLine(t, err)
	if !strings.Contains(err.Error(), "is not a directory") {
		t.Fatalf("Open of a file: %v", err)
	}
}

const helperEnv = "TASKDECK_STORE_HELPER_DIR"

// helperBigWALEnv makes the helper write 4 MiB more with the 8 MiB
// memtables used before issue 20, all of it in its WAL when it is killed.
const helperBigWALEnv = "TASKDECK_STORE_HELPER_BIG_WAL"

// TestHelperProcess is not a test: TestLockedByAnotherProcess runs the
// test binary again with helperEnv set, and this opens the store there,
// writes one record, says "ready" and holds the store until killed.
func TestHelperProcess(t *testing.T) {
	dir := os.Getenv(helperEnv)
	if dir == "" {
		t.Skip("helper process for TestLockedByAnotherProcess")
	}
	bigWAL := os.Getenv(helperBigWALEnv) != ""
	if bigWAL {
		badger.UseSizing("before20")
	}
	s, err := badger.Open(dir, nil)
	if err == nil {
		err = s.Create(intent("from-child", t0))
	}
	for i := 0; bigWAL && i < 100 && err == nil; i++ {
		rec := intent(fmt.Sprint("big-", i), t0)
		rec.Arguments = json.RawMessage(fmt.Sprintf(`{"note":%q}`, strings.Repeat("x", 40<<10)))
		err = s.Create(rec)
	}
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}

func TestLockedByAnotherProcess(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
	cmd.Env = append(os.Environ(), helperEnv+"="+dir)
	stdin, err := cmd.StdinPipe()
	must(t, err)
	defer stdin.Close()
	stdout, err := cmd.StdoutPipe()
	must(t, err)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	must(t, cmd.Start())
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}
	defer stop()

	line := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(stdout).ReadString('\n')
		line <- l
	}()
	select {
	case l := <-line:
		if l != "ready\n" {
			stop()
			t.Fatalf("helper said %q; stderr: %s", l, stderr.String())
		}
	case <-time.After(waitfor.Scale(30 * time.Second)):
		t.Fatal("helper did not open the store within 30 s (scaled)")
	}

	_, err = badger.Open(dir, nil)
	var locked *store.LockedError
	if !errors.As(err, &locked) {
		t.Fatalf("Open while another process holds the store: %v, want *LockedError", err)
	}
	assertOneLine(t, err)
	if locked.PID != cmd.Process.Pid || locked.Dir != dir {
		t.Fatalf("LockedError = %+v, want pid %d dir %s", locked, cmd.Process.Pid, dir)
	}
	want := fmt.Sprintf("store %s is in use by another taskdeck (pid %d); close it or use --data-dir", dir, cmd.Process.Pid)
	if err.Error() != want {
		t.Fatalf("message %q, want %q", err.Error(), want)
	}

	// Killed without closing: the lock goes with the process, and the
	// record it wrote before saying ready is there.
	stop()
	s := openStore(t, dir)
	rec, err := s.ByKey("from-child")
	if err != nil {
		t.Fatalf("record written by the killed owner: %v", err)
	}
	// The revision survived the kill with it.
	if rec.Revision != 1 || s.Revision() != 1 {
		t.Fatalf("after the kill: record at revision %d, store at %d; want 1 and 1", rec.Revision, s.Revision())
	}
}

// TestOpenAfterKillWithABigWAL: a store killed with 4 MiB of commits in
// a WAL of the 8 MiB memtables used before issue 20 opens with the smaller
// sizing, which replays it into one memtable of the WAL's own size, and
// every commit is there.
func TestOpenAfterKillWithABigWAL(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
	cmd.Env = append(os.Environ(), helperEnv+"="+dir, helperBigWALEnv+"=1")
	stdin, err := cmd.StdinPipe()
	must(t, err)
	defer stdin.Close()
	out, err := cmd.StdoutPipe()
	must(t, err)
	must(t, cmd.Start())
	l, _ := bufio.NewReader(out).ReadString('\n')
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if l != "ready\n" {
		t.Fatalf("helper said %q", l)
	}
	s := openStore(t, dir)
	for i := range 100 {
		if _, err := s.ByKey(fmt.Sprint("big-", i)); err != nil {
			t.Fatalf("record %d written before the kill: %v", i, err)
		}
	}
}

// TestOpensTablesOfEarlierLayouts: tables written with 64 KiB blocks (a
// candidate sizing), or with bloom filters (the store's tables before
// issue 23), are checked, read, rewritten and compacted with tables of
// the store's own: a table's index says where its blocks are and whether
// it has a filter, so both can change between two opens.
func TestOpensTablesOfEarlierLayouts(t *testing.T) {
	for name, use := range map[string]func() func(){
		"blocks64K":     func() func() { return badger.UseSizing("blocks64K") },
		"bloom filters": badger.UseBloomFilters,
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			restore := use()
			s, err := badger.Open(dir, nil)
			must(t, err)
			var recs []*model.Task
			for i := range 200 {
				recs = append(recs, create(t, s, fmt.Sprint("k-", i), model.StatusWorking, t0))
			}
			must(t, s.Close()) // flushes the memtable into a table of that layout
			restore()
			for round := range 2 {
				s = openStore(t, dir)
				for _, rec := range recs {
					got, err := s.Get(rec.ID)
					if err != nil || got.IdempotencyKey != rec.IdempotencyKey {
						t.Fatalf("round %d: record %s: %v, %v", round, rec.ID, got, err)
					}
				}
				half := len(recs) / 2
				for _, rec := range recs[:half] {
					_, err := s.Update(rec.ID, moveTo(model.StatusCompleted, t0))
					must(t, err)
				}
				_, err = s.Prune(time.Time{}, tester) // compacts the old tables with the new
				must(t, err)
				recs = recs[half:]
				must(t, s.Close())
			}
		})
	}
}

// TestTablesCarryNoBloomFilters: Badger checksums a table's whole index,
// filters included, at every open (options.go, bloomFalsePositive).
func TestTablesCarryNoBloomFilters(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	for i := range 200 {
		create(t, s, fmt.Sprint("k-", i), model.StatusCompleted, t0)
	}
	must(t, s.Close()) // flushes the memtable into a table
	n, err := badger.FilterBytes(dir)
	must(t, err)
	if n != 0 {
		t.Fatalf("the tables carry %d bytes of bloom filters, want none", n)
	}
}

func TestOpenTwiceInProcess(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	_, err := badger.Open(dir, nil)
	var locked *store.LockedError
	if !errors.As(err, &locked) || locked.PID != os.Getpid() {
		t.Fatalf("second Open in one process: %v, want *LockedError with our pid", err)
	}
	assertOneLine(t, err)
	// The first handle is untouched.
	create(t, s, "still-works", model.StatusWorking, t0)
}

// TestOpenWhileThisProcessForks: a child forked by another goroutine
// holds a copy of the store directory's locked descriptor until it
// execs. Open waits that moment out instead of calling the store in use
// (CI: a test's open after a crash storm, while other tests started
// processes; 115 of 300 opens failed here before Open waited).
func TestOpenWhileThisProcessForks(t *testing.T) {
	dir := t.TempDir()
	var forks sync.WaitGroup
	stop := make(chan struct{})
	for range 3 {
		forks.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := exec.Command("true").Run(); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	defer forks.Wait()
	defer close(stop)
	for i := range 100 {
		s, err := badger.Open(dir, nil)
		if err != nil {
			t.Fatalf("open %d of 100, while this process forks: %v", i+1, err)
		}
		must(t, s.Close())
	}
}

// TestOpenWaitsOnlyForAHolderItCannotName: a lock whose LOCK file names
// a process that has died is let go soon, and Open waits for it; a lock
// that names nobody and is never let go is reported held once the wait
// is over, not waited on for ever.
func TestOpenWaitsOnlyForAHolderItCannotName(t *testing.T) {
	hold := func(t *testing.T, dir string) (release func()) {
		t.Helper()
		d, err := os.Open(dir)
		must(t, err)
		must(t, syscall.Flock(int(d.Fd()), syscall.LOCK_EX|syscall.LOCK_NB))
		return sync.OnceFunc(func() { d.Close() })
	}
	t.Run("a dead holder named", func(t *testing.T) {
		dir := t.TempDir()
		dead := exec.Command("true")
		must(t, dead.Run()) // reaped: its pid names no process
		must(t, os.WriteFile(filepath.Join(dir, "LOCK"), fmt.Appendf(nil, "%d\n", dead.Process.Pid), 0o600))
		release := hold(t, dir)
		defer release()
		time.AfterFunc(50*time.Millisecond, release)
		s, err := badger.Open(dir, nil)
		if err != nil {
			t.Fatalf("Open while a lock naming dead pid %d is let go: %v", dead.Process.Pid, err)
		}
		must(t, s.Close())
	})
	t.Run("nobody named, never let go", func(t *testing.T) {
		dir := t.TempDir()
		defer hold(t, dir)()
		_, err := badger.Open(dir, nil)
		var locked *store.LockedError
		if !errors.As(err, &locked) || locked.PID != 0 {
			t.Fatalf("Open of a store held by a lock naming nobody: %v, want *LockedError naming no pid", err)
		}
		assertOneLine(t, err)
	})
}

func TestCorruptStore(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		damage     func(path string) error
	}{
		{"garbage manifest", "MANIFEST", func(p string) error { return os.WriteFile(p, []byte("this is not a manifest"), 0o600) }},
		{"empty manifest", "MANIFEST", func(p string) error { return os.Truncate(p, 0) }},
		{"garbage key registry", "KEYREGISTRY", func(p string) error { return os.WriteFile(p, []byte("garbage garbage garbage"), 0o600) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s := openStore(t, dir)
			create(t, s, "k", model.StatusWorking, t0)
			must(t, s.Close())
			must(t, tc.damage(filepath.Join(dir, tc.file)))

			// Twice: a refused open must release the directory lock.
			for range 2 {
				_, err := badger.Open(dir, nil)
				var corrupt *store.CorruptError
				if !errors.As(err, &corrupt) {
					t.Fatalf("Open of a damaged store: %v, want *CorruptError", err)
				}
				assertOneLine(t, err)
				if !strings.HasPrefix(err.Error(), "store "+dir+" is damaged: ") ||
					!strings.HasSuffix(err.Error(), "; move it aside and start again") {
					t.Fatalf("message %q", err)
				}
			}
		})
	}
}

func TestNewerSchemaRefused(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	must(t, badger.PutRaw(s, "v\x00", "99"))
	must(t, s.Close())
	_, err := badger.Open(dir, nil)
	assertOneLine(t, err)
	if !strings.Contains(err.Error(), "schema version") {
		t.Fatalf("Open of a newer store: %v", err)
	}
}

// A store written by the version 1 layout opens, reads its records and
// is marked version 3.
func TestVersion1StoreOpens(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	rec := create(t, s, "", model.StatusCompleted, t0)
	must(t, badger.PutRaw(s, "v\x00", "1"))
	must(t, s.Close())
	s = openStore(t, dir)
	if got, err := s.Get(rec.ID); err != nil || got.Status != model.StatusCompleted {
		t.Fatalf("Get after opening a version 1 store = %+v, %v", got, err)
	}
	if v, err := badger.Raw(s, "v\x00"); err != nil || v != "4" {
		t.Fatalf("schema version after opening a version 1 store: %q, %v", v, err)
	}
}

// Badger's default logger writes to stderr, which would tear the
// dashboard. Nothing may reach it, with or without a logger.
func TestNothingOnStderr(t *testing.T) {
	r, w, err := os.Pipe()
	must(t, err)
	saved := os.Stderr
	os.Stderr = w
	got := make(chan string)
	go func() {
		b, _ := io.ReadAll(r)
		got <- string(b)
	}()

	var logBuf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logBuf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	for _, l := range []*slog.Logger{nil, logger} {
		dir := t.TempDir()
		s, err := badger.Open(dir, l)
		if err == nil {
			for range 50 {
				if err = s.Create(intent("", t0)); err != nil {
					break
				}
			}
			_, _ = s.Prune(time.Time{}, tester)
			if cerr := s.Close(); err == nil {
				err = cerr
			}
		}
		if err == nil {
			s, err = badger.Open(dir, l) // a reopen replays and logs more
		}
		if err == nil {
			err = s.Close()
		}
		if err != nil {
			os.Stderr = saved
			t.Fatal(err)
		}
	}

	os.Stderr = saved
	_ = w.Close()
	if out := <-got; out != "" {
		t.Fatalf("the store wrote to stderr:\n%s", out)
	}
	if strings.Contains(logBuf.String(), "level=INFO") || strings.Contains(logBuf.String(), "level=DEBUG") {
		t.Fatalf("Badger INFO/DEBUG reached the logger:\n%s", logBuf.String())
	}
}

func TestBadgerLoggerKeepsWarningsAndErrors(t *testing.T) {
	var buf bytes.Buffer
	l := badger.BadgerLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	l.Infof("All %d tables opened\n", 0)
	l.Debugf("noise")
	l.Warningf("value log %s\n", "truncated")
	l.Errorf("cannot %s", "compact")
	out := buf.String()
	if strings.Contains(out, "tables opened") || strings.Contains(out, "noise") {
		t.Errorf("INFO or DEBUG got through:\n%s", out)
	}
	if !strings.Contains(out, `level=WARN msg="value log truncated"`) || !strings.Contains(out, `level=ERROR msg="cannot compact"`) {
		t.Errorf("warning or error missing (or a trailing newline kept):\n%s", out)
	}
}
