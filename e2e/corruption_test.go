package e2e

// The corruption sweep: seeded random damage to every file of a store,
// each read back by the real binary. A damaged store must either read back
// exactly as it was or be refused in one "damaged" line (exit 6): never a
// record lost or changed without a word, never a panic trace.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/internal/clitest"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store/badger"
)

// sweepRecords: tableRecords are flushed into a table by a clean close,
// the rest are in the memtable's WAL only, as a crash leaves them.
const (
	sweepRecords = 60
	tableRecords = 40
)

// damageBase makes a store of sweepRecords records of every status and
// returns a crash image of it: tables, a WAL holding the newest records,
// value log, MANIFEST, KEYREGISTRY, DISCARD, LOCK and TABLESUMS.
func damageBase(t *testing.T) string {
	t.Helper()
	live := filepath.Join(t.TempDir(), "live")
	s, err := badger.Open(live, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for i := range sweepRecords {
		if i == tableRecords {
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if s, err = badger.Open(live, nil); err != nil {
				t.Fatal(err)
			}
		}
		// Every fifth record's arguments are big enough to be kept under
		// a key of their own: damage there must be found too.
		text := strings.Repeat("arg", i%7)
		if i%5 == 0 {
			text = strings.Repeat("big arguments ", 100)
		}
		args, _ := json.Marshal(map[string]any{"n": i, "text": text})
		rec := model.NewIntent(model.ServerRef{Name: "demo", URL: "http://127.0.0.1:9/mcp"}, "sleep", args, fmt.Sprintf("key-%d", i), now)
		rec.TaskID = fmt.Sprintf("srv-task-%03d", i)
		st := model.AllStatuses[i%len(model.AllStatuses)]
		if st == model.StatusCalling {
			// The store's next owner turns a stale intent orphaned as it
			// opens (a write): the sweep compares reads, so there is none.
			st = model.StatusOrphaned
		}
		switch st {
		case model.StatusFound, model.StatusLeft:
			// A record of a task a server listed: made found, then left.
			rec = model.NewFound(rec.Server, model.Snapshot{TaskID: rec.TaskID, Status: model.StatusWorking, StatusMessage: fmt.Sprintf("listed, record %d", i)}, now)
			if st == model.StatusLeft {
				if err := rec.LeaveFound(now); err != nil {
					t.Fatal(err)
				}
			}
		case model.StatusOrphaned:
		default:
			if err := rec.MoveTo(model.StatusWorking, fmt.Sprintf("step %d of %d", i, sweepRecords), now); err != nil {
				t.Fatal(err)
			}
		}
		if st != model.StatusWorking && st != model.StatusFound && st != model.StatusLeft {
			if err := rec.MoveTo(st, fmt.Sprintf("ended as %s, record %d", st, i), now); err != nil {
				t.Fatal(err)
			}
		}
		if st == model.StatusCompleted {
			rec.Result = json.RawMessage(fmt.Sprintf(`{"content":[{"type":"text","text":"result %d"}]}`, i))
		}
		if err := s.Create(rec); err != nil {
			t.Fatal(err)
		}
	}
	// Every record is synced: a copy of the open store is what a kill
	// leaves, once no compaction added or removed a table while it was
	// taken (the reopen above starts one at its own time; CI saw a copy
	// whose MANIFEST named a table the copy lacked).
	base := filepath.Join(t.TempDir(), "base")
	for try := 1; ; try++ {
		before := fileNames(t, live)
		sparseCopy(t, live, base)
		if slices.Equal(before, fileNames(t, live)) {
			break
		}
		if try == 100 {
			t.Fatalf("the store's tables changed during each of %d copies", try)
		}
		if err := os.RemoveAll(base); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return base
}

// fileNames lists the files of dir.
func fileNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// sparseCopy copies a flat directory, leaving holes where the source has
// zeros: Badger's memtable and value log files are mostly unwritten.
func sparseCopy(t *testing.T, from, to string) {
	t.Helper()
	if err := os.MkdirAll(to, 0o700); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	buf, zero := make([]byte, 64<<10), make([]byte, 64<<10)
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		src, err := os.Open(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		dst, err := os.OpenFile(filepath.Join(to, e.Name()), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		var off int64
		for {
			n, err := io.ReadFull(src, buf)
			if n > 0 && !bytes.Equal(buf[:n], zero[:n]) {
				if _, werr := dst.WriteAt(buf[:n], off); werr != nil {
					t.Fatal(werr)
				}
			}
			off += int64(n)
			if err != nil {
				break
			}
		}
		if err := dst.Truncate(off); err != nil {
			t.Fatal(err)
		}
		src.Close()
		dst.Close()
	}
}

// usedSize is the length of path up to its last non-zero byte.
func usedSize(b []byte) int {
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] != 0 {
			return i + 1
		}
	}
	return 0
}

var damageKinds = []string{"bit flips", "zeroed 64 bytes", "truncated"}

// damage does damage kind to the file at path, at offsets drawn from rng:
// mostly inside the part of the file that holds data, sometimes anywhere.
// It returns what it did.
func damage(t *testing.T, rng *rand.Rand, path, kind string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) == 0 {
		return "empty file, nothing to damage"
	}
	span := max(usedSize(b), 1)
	if rng.IntN(4) == 0 {
		span = len(b)
	}
	off := rng.IntN(span)
	var what string
	switch kind {
	case "bit flips":
		n := 1 + rng.IntN(8)
		for i := range n {
			o := off
			if i > 0 {
				o = rng.IntN(span)
			}
			b[o] ^= 1 << rng.IntN(8)
		}
		what = fmt.Sprintf("%d bit flips from offset %d", n, off)
	case "zeroed 64 bytes":
		clear(b[off:min(off+64, len(b))])
		what = fmt.Sprintf("64 bytes zeroed at %d", off)
	case "truncated":
		b = b[:off]
		what = fmt.Sprintf("cut to %d bytes", off)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return what
}

// fileClass names a store file by kind, for the tally.
func fileClass(name string) string {
	if ext := filepath.Ext(name); ext != "" {
		return ext
	}
	return name
}

// TestCorruptionSweep damages one file of a copy of the store per seed,
// over every file and three kinds of damage, and runs `taskdeck ls --json`
// on it. All of it runs the real binary; 2 workers keep it near 20 s on 2
// cores.
func TestCorruptionSweep(t *testing.T) {
	t.Parallel()
	base := damageBase(t)
	env := testEnv(t)
	lsOn := func(t *testing.T, dir string) clitest.Result {
		return runTD(t, env, "--data-dir", dir, "ls", "--json") // no config: the default path in the test's own XDG directory
	}
	clean := filepath.Join(t.TempDir(), "clean")
	sparseCopy(t, base, clean)
	want := lsOn(t, clean).Must(t, 0)
	if n := strings.Count(want.Stdout, "\n"); n != sweepRecords || want.Stderr != "" {
		t.Fatalf("the undamaged store lists %d records, want %d\n%s", n, sweepRecords, want)
	}
	files := fileNames(t, base)
	for _, ext := range []string{".sst", ".mem", ".vlog", "MANIFEST", "TABLESUMS"} {
		if !slices.ContainsFunc(files, func(f string) bool { return fileClass(f) == ext }) {
			t.Fatalf("the store has no %s file to damage: %v", ext, files)
		}
	}

	seeds := 240
	if testing.Short() {
		seeds = 60
	}
	type outcome struct{ file, kind, class string }
	var (
		mu    sync.Mutex
		tally = map[outcome]int{}
		bad   []string
	)
	work := make(chan int)
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for seed := range work {
				rng := rand.New(rand.NewPCG(uint64(seed), 0x5eed))
				file := files[seed%len(files)]
				kind := damageKinds[(seed/len(files))%len(damageKinds)]
				dir := filepath.Join(t.TempDir(), "data")
				sparseCopy(t, base, dir)
				what := damage(t, rng, filepath.Join(dir, file), kind)
				if fileClass(file) == ".sst" && seed%2 == 1 {
					// Without its recorded sum a table is checked block by
					// block: damage must be found that way too.
					if err := os.Remove(filepath.Join(dir, "TABLESUMS")); err != nil {
						t.Fatal(err)
					}
					what += ", TABLESUMS removed"
				}
				r := lsOn(t, dir)
				class := classify(r, want.Stdout, dir)
				if class == "silent loss" && fileClass(file) == ".mem" && r.Stdout == dropNewest(want.Stdout) {
					// Damage inside the WAL's last commit reads as that
					// commit torn by a crash: dropped, as it must be.
					class = "last commit torn"
				}
				mu.Lock()
				tally[outcome{fileClass(file), kind, class}]++
				if class != "intact" && class != "refused" && class != "last commit torn" {
					bad = append(bad, fmt.Sprintf("seed %d, %s: %s: %s\n%s", seed, file, what, class, r))
				}
				mu.Unlock()
				os.RemoveAll(dir)
			}
		})
	}
	for seed := range seeds {
		work <- seed
	}
	close(work)
	wg.Wait()

	keys := make([]outcome, 0, len(tally))
	for k := range tally {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b outcome) int {
		return strings.Compare(a.file+a.kind+a.class, b.file+b.kind+b.class)
	})
	totals := map[string]int{}
	for _, k := range keys {
		t.Logf("%-12s %-16s %-14s %d", k.file, k.kind, k.class, tally[k])
		totals[k.class] += tally[k]
	}
	t.Logf("%d damages: %v", seeds, totals)
	for _, b := range bad {
		t.Error(b)
	}
}

// dropNewest is the listing without its first line: the newest record.
func dropNewest(ls string) string {
	_, rest, _ := strings.Cut(ls, "\n") // ls lists the newest first
	return rest
}

// classify says what one ls of a damaged store did: "intact" (every
// record, byte for byte), "refused" (exit 6, one line saying the store is
// damaged, nothing listed), or the failure.
func classify(r clitest.Result, want, dir string) string {
	switch {
	case strings.Contains(r.Stderr, "panic") || strings.Contains(r.Stderr, "goroutine "):
		return "panic"
	case r.Code == 0 && r.Stdout == want && r.Stderr == "":
		return "intact"
	case r.Code == 0 && strings.Count(r.Stdout, "\n") < sweepRecords:
		return "silent loss"
	case r.Code == 0:
		return "silent change"
	case r.Code == exitLocal && r.Stdout == "" && strings.Count(r.Stderr, "\n") == 1 &&
		strings.HasPrefix(r.Stderr, "taskdeck: store "+dir+" is damaged: "):
		return "refused"
	}
	return fmt.Sprintf("other (exit %d)", r.Code)
}
