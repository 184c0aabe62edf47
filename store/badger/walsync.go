package badger

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Durability. Badger with SyncWrites syncs two files per commit: the
// memtable's WAL, and the value log even when the commit put nothing in
// it (values under the value threshold stay in the LSM tree). On this VM each
// sync is a disk cache flush, so a durable record cost 1.35-1.45x a bare
// write+fsync. The store therefore runs Badger without SyncWrites and,
// after every commit and before any caller hears of it, syncs the one
// file the commit went to: the WAL of the current memtable. A commit
// with a value big enough for the value log, or a store whose WAL this
// cannot find, gets Badger's own db.Sync (WAL and value log) instead.
//
// Badger writes each commit into the current memtable's WAL, a file named
// %05d.mem whose number grows by one with every new memtable; an older
// WAL holds only commits that were synced when they were made. Writes
// through Badger's mapping and this descriptor share the page cache, so
// syncing the descriptor flushes them. The first commit into a WAL also
// syncs the directory, which names the new file.

const walExt = ".mem"

// walSyncer keeps the current memtable WAL open to sync it.
type walSyncer struct {
	dir string
	fid int
	f   *os.File
	// d is dir, open: the next WAL is looked for from it, one path
	// component (a path from the root cost a loaded VM 37-67 µs a commit
	// against 8-12 µs: BenchmarkWALProbe), and it is synced through it.
	d *os.File
	// next is the name the next WAL will have.
	next string
	// stale: a commit failed, and Badger may have skipped a file number;
	// look the newest WAL up again.
	stale bool
	// dirSynced: the directory entry of f is durable. Badger does not
	// sync the directory when it creates a WAL (ristretto v2.2.0's
	// OpenMmapFileUsing tests the size it has just set, not the old one).
	dirSynced bool
	// onSync, when set (tests), hears of every path synced.
	onSync func(path string)
}

// newWALSyncer finds the current WAL in dir; ok is false when there is
// none to be found, and the store must use db.Sync.
func newWALSyncer(dir string) (w *walSyncer, ok bool) {
	w = &walSyncer{dir: dir}
	return w, w.lookUp() == nil
}

// errWALUnknown means the current WAL could not be found; db.Sync must do.
var errWALUnknown = errors.New("memtable WAL not found")

// sync makes the current WAL's contents durable.
func (w *walSyncer) sync() error {
	if w.stale && w.lookUp() != nil {
		return errWALUnknown
	}
	// A new memtable since the last commit means a newer WAL.
	for exists(w.d, w.next) {
		next, err := os.OpenFile(filepath.Join(w.dir, w.next), os.O_RDWR, 0)
		if err != nil {
			break
		}
		w.f.Close()
		w.f, w.dirSynced = next, false
		w.setFid(w.fid + 1)
	}
	if err := datasync(w.f); err != nil {
		return fmt.Errorf("cannot sync %s: %w", w.f.Name(), err)
	}
	w.synced(w.f.Name())
	if !w.dirSynced {
		if err := w.d.Sync(); err != nil {
			return fmt.Errorf("cannot sync the directory of %s: %w", w.f.Name(), err)
		}
		w.dirSynced = true
		w.synced(w.dir)
	}
	return nil
}

func (w *walSyncer) synced(path string) {
	if w.onSync != nil {
		w.onSync(path)
	}
}

// lookUp opens the WAL with the highest number in dir.
func (w *walSyncer) lookUp() error {
	entries, err := os.ReadDir(w.dir)
	if err != nil {
		return err
	}
	best := -1
	for _, e := range entries {
		num, isWAL := strings.CutSuffix(e.Name(), walExt)
		if fid, err := strconv.Atoi(num); isWAL && err == nil && fid > best {
			best = fid
		}
	}
	if best < 0 {
		return errWALUnknown
	}
	f, err := os.OpenFile(filepath.Join(w.dir, walName(best)), os.O_RDWR, 0)
	if err != nil {
		return err
	}
	d, err := os.Open(w.dir)
	if err != nil {
		f.Close()
		return err
	}
	w.close()
	w.f, w.d, w.stale, w.dirSynced = f, d, false, false
	w.setFid(best)
	return nil
}

func (w *walSyncer) setFid(fid int) {
	w.fid, w.next = fid, walName(fid+1)
}

// walName is the name Badger gives WAL fid (its mtFilePath).
func walName(fid int) string { return fmt.Sprintf("%05d%s", fid, walExt) }

func (w *walSyncer) close() {
	for _, f := range []**os.File{&w.f, &w.d} {
		if *f != nil {
			_ = (*f).Close()
			*f = nil
		}
	}
}
