package badger

import (
	"github.com/taskdeck/taskdeck/store"

	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/table"
)

// filesFound is what checkFiles learnt on the way.
type filesFound struct {
	level0   int   // tables the MANIFEST lists in level 0
	walBytes int64 // commits in the WALs, which Open replays and flushes
	// walFile is the largest WAL file: Badger sizes one at twice the
	// memtable it was written for, whose arena its replay fills.
	walFile int64
	// compactBytes is what compacting level 0 rewrites: its tables and
	// those of the first level below it that has any.
	compactBytes int64
	// emptyFiles counts 0-byte memtable and value-log files: each is a
	// process killed between creating the file and sizing it.
	emptyFiles int
}

func (f *filesFound) countEmpty(fi fs.FileInfo) {
	if fi.Size() == 0 {
		f.emptyFiles++
	}
}

// checkFiles looks for four kinds of damage before Badger opens dir,
// because Badger does not report them:
//   - a memtable WAL damaged before its last commit (walcheck.go);
//   - a listed table file cut short: Badger reads its footer without
//     bounds checks and panics in a goroutine that no caller can recover
//     (checked with the table's contents, tablesums.go);
//   - a listed table damaged anywhere else (tablesums.go);
//   - tables that a missing or cut-short MANIFEST no longer lists: Badger
//     would delete them as leftovers of an unfinished compaction, and with
//     them every record they hold.
//
// A clean store passes; so does one left by a crash (kill -9): there the
// MANIFEST is whole, and a table it does not list, even an empty one, is a
// real leftover that Badger removes.
func checkFiles(dir string, opt badger.Options) (found filesFound, err error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return found, nil // prepareDir has vouched for dir; let Badger say what is wrong
	}
	var tables []string
	var wals []walSpan
	for _, e := range entries {
		switch {
		case !e.Type().IsRegular():
		case strings.HasSuffix(e.Name(), ".sst"):
			tables = append(tables, e.Name())
		case strings.HasSuffix(e.Name(), walExt):
			span, reason := checkWAL(filepath.Join(dir, e.Name()), 2*opt.MemTableSize)
			if reason != "" {
				return found, &store.CorruptError{Dir: dir, Reason: reason}
			}
			wals = append(wals, span)
			found.walBytes += span.end
			if fi, err := e.Info(); err == nil {
				found.walFile = max(found.walFile, fi.Size())
				found.countEmpty(fi)
			}
		case strings.HasSuffix(e.Name(), ".vlog"):
			if fi, err := e.Info(); err == nil {
				found.countEmpty(fi)
			}
		}
	}
	if len(tables) == 0 {
		return found, nil
	}
	fp, err := os.Open(filepath.Join(dir, badger.ManifestFilename))
	if errors.Is(err, fs.ErrNotExist) {
		return found, &store.CorruptError{Dir: dir, Reason: fmt.Sprintf("MANIFEST is missing but %d table files are there", len(tables))}
	}
	if err != nil {
		return found, nil
	}
	defer fp.Close()
	fi, err := fp.Stat()
	if err != nil {
		return found, nil
	}
	m, truncAt, err := badger.ReplayManifestFile(fp, opt.ExternalMagicVersion, opt)
	if err != nil {
		return found, nil // Badger reports a bad MANIFEST itself
	}
	var unlisted, listed []string
	for _, name := range tables {
		id, err := strconv.ParseUint(strings.TrimSuffix(name, ".sst"), 10, 64)
		if err != nil {
			continue
		}
		if _, listed := m.Tables[id]; !listed {
			unlisted = append(unlisted, name)
			continue
		}
		listed = append(listed, name)
	}
	// No commit to replay: the last session closed cleanly (or crashed
	// with none unflushed, its new tables unsummed and so read).
	if reason := checkTables(dir, m, listed, opt, found.walBytes == 0); reason != "" {
		return found, &store.CorruptError{Dir: dir, Reason: reason}
	}
	if len(unlisted) > 0 && truncAt < fi.Size() {
		slices.Sort(unlisted)
		return found, &store.CorruptError{Dir: dir, Reason: fmt.Sprintf("MANIFEST is cut short (%d of %d bytes readable) and no longer lists %s",
			truncAt, fi.Size(), strings.Join(unlisted, ", "))}
	}
	if len(m.Tables) == 0 {
		// A MANIFEST that lists no table is new, or cut back to its first
		// records. The only table a new one may leave unlisted is that of
		// a first flush killed before it was recorded, which holds the
		// commits of a WAL that is still there.
		for _, name := range unlisted {
			if v, ok := tableMaxVersion(filepath.Join(dir, name), opt); ok && !slices.ContainsFunc(wals, func(w walSpan) bool {
				return w.first <= v && v <= w.last
			}) {
				return found, &store.CorruptError{Dir: dir, Reason: fmt.Sprintf("MANIFEST lists no table, but %s holds records that no WAL has", name)}
			}
		}
	}
	sizes := map[uint8]int64{}
	for id, tm := range m.Tables {
		if tm.Level == 0 {
			found.level0++
		}
		if fi, err := os.Stat(table.NewFilename(id, dir)); err == nil {
			sizes[tm.Level] += fi.Size()
		}
	}
	found.compactBytes = sizes[0]
	for l := uint8(1); l < 255; l++ {
		if sizes[l] > 0 {
			found.compactBytes += sizes[l]
			break
		}
	}
	return found, nil
}

// tableMaxVersion reads the newest commit timestamp in a table's index;
// ok is false when the table cannot be read (a leftover cut short).
func tableMaxVersion(path string, opt badger.Options) (v uint64, ok bool) {
	if tableFooter(path) != "" {
		return 0, false
	}
	err := withTable(path, opt.Compression, opt, func(t *table.Table) error {
		v = t.MaxVersion()
		return nil
	})
	return v, err == nil
}

// tableFooter checks the footer of a table file the way Badger reads it
// (table.initIndex): the last 4 bytes are the checksum length, before the
// checksum come 4 bytes of index length, before them the index. It returns
// why the footer cannot be read, or "".
func tableFooter(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return ""
	}
	size := fi.Size()
	var u32 [4]byte
	if size < 8 {
		return fmt.Sprintf("is cut short (%d bytes)", size)
	}
	if _, err := f.ReadAt(u32[:], size-4); err != nil {
		return ""
	}
	sumLen := int64(binary.BigEndian.Uint32(u32[:]))
	if sumLen > size-8 {
		return fmt.Sprintf("is cut short or damaged (its footer names a %d-byte checksum in %d bytes)", sumLen, size)
	}
	if _, err := f.ReadAt(u32[:], size-8-sumLen); err != nil {
		return ""
	}
	if indexLen := int64(binary.BigEndian.Uint32(u32[:])); indexLen > size-8-sumLen {
		return fmt.Sprintf("is cut short or damaged (its footer names a %d-byte index in %d bytes)", indexLen, size)
	}
	return ""
}

// openRoom is the space Badger's Open needs besides the WALs it replays:
// a page or two of each file it maps (a new WAL and value log, the
// DISCARD file) and of LOCK and MANIFEST.
const openRoom = 256 << 10

// ErrDiskFull is returned by Open when the disk has too little space left
// to open the store.
var ErrDiskFull = errors.New("no space left on device")

// checkRoom refuses to open a store whose disk is (nearly) full. Badger
// maps its files sparse, and on a full disk the first touch of an
// unbacked page, even a read (tmpfs allocates on read faults), kills the
// process with SIGBUS, which no Go code can recover: Open replays each
// WAL through its mapping and flushes what it replayed into new tables.
func checkRoom(dir string, walBytes int64) error {
	need := uint64(openRoom + 2*walBytes)
	if free, ok := freeBytes(dir); ok && free < need {
		return fmt.Errorf("store %s: the disk is full (%w: %d KiB free, about %d KiB needed to open the store); free some space", dir, ErrDiskFull, free>>10, need>>10)
	}
	return nil
}

// closeTimeout bounds Close. Badger's Close flushes the memtable into a new
// table and retries a failed flush forever.
var closeTimeout = 20 * time.Second

// ErrNoRoomToFlush is returned by Close when the disk is too full to flush
// the store. Nothing is lost: every change was synced to Badger's
// write-ahead log, which the next Open replays.
var ErrNoRoomToFlush = errors.New("too little free disk space to flush the store")

// roomToCompact tells whether the disk has room for Close to compact
// level 0 on top of flushing the memtable, by the measure closeRoom uses. Without it Close only
// flushes: a compaction Close could not afford would make it skip the
// flush too (closeDB), and say the disk is full, at every short command.
func roomToCompact(dir string, found filesFound, memTable int64) bool {
	free, ok := freeBytes(dir)
	return !ok || free >= uint64(memTable+found.compactBytes)
}

// closeRoom is what Close may write: the memtable flushed into a table
// and, when it compacts level 0 (Open), that level and the one it goes to.
func (s *Store) closeRoom() uint64 {
	need := s.db.Opts().MemTableSize
	if s.db.Opts().CompactL0OnClose {
		for _, l := range s.db.Levels() {
			if l.Level == 0 || l.IsBaseLevel {
				need += l.Size
			}
		}
	}
	return uint64(need)
}

// closeDB closes db unless its disk is nearly full, within closeTimeout,
// once the reads and commits in flight are done.
// Badger writes the flushed table through a memory map: on a full disk the
// first store to an unbacked page kills the process with SIGBUS, which no
// Go code can recover. Skipping the flush instead leaves the store as a
// crash would, which Open handles.
func (s *Store) closeDB() error {
	if free, ok := freeBytes(s.dir); ok && free < s.closeRoom() {
		return fmt.Errorf("store %s: %w (%d KiB free); every change is synced and is read back at the next start, but free some space", s.dir, ErrNoRoomToFlush, free>>10)
	}
	done := make(chan error, 1)
	go func() {
		s.closing.Lock() // waits for the reads and commits in flight
		s.closed = true  // and refuses those that come later
		s.closing.Unlock()
		err := s.db.Close()
		if s.wal != nil {
			s.wal.close()
		}
		if err == nil {
			// Modes first: a chmod after the sums would move the new
			// tables' stamps, and have them read again at the next open.
			_ = restrictFiles(s.dir)
			_ = recordSums(s.dir) // best effort: a table not recorded is checked at the next open
		}
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(closeTimeout):
		return fmt.Errorf("store %s did not close within %s (is its disk failing or full?); every change is synced and is read back at the next start", s.dir, closeTimeout)
	}
}
