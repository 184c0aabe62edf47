package store

import (
	"fmt"
	"log/slog"
	"strings"

	badger "github.com/dgraph-io/badger/v4"
)

// valueThreshold keeps records in the LSM tree, where compaction drops
// the old copy of a rewritten record; a value this big or bigger goes to
// the value log, whose old copies only a reclaim gives back (reclaim.go).
// At 64 KiB, every poll of a task with 100 KB of arguments appended 100 KB
// to the value log for good (issue 20). 1 MiB is Badger's most; it must
// also stay <= 15% of MemTableSize (the txn size limit).
const valueThreshold = 1 << 20

// compactL0At: once the MANIFEST lists this many level-0 tables, Open
// makes the session's Close compact level 0.
const compactL0At = 4

// options are the "small" set measured in shared/notes/libraries.md §3.8:
// the defaults map gigabytes of sparse files and keep 256 MiB of cache for a
// store that holds a few thousand small records.
func options(dir string, logger *slog.Logger) badger.Options {
	var l badger.Logger // a nil interface, which silences Badger entirely
	if logger != nil {
		l = badgerLogger{logger.With("component", "badger")}
	}
	return badger.DefaultOptions(dir).
		WithLogger(l).             // never the default, which writes to stderr under the TUI
		WithSyncWrites(false).     // the store syncs each commit itself, see walsync.go
		WithMemTableSize(8 << 20). // also sets the txn size limit (15%), see pruneChunk
		WithValueThreshold(valueThreshold).
		WithNumMemtables(2).
		WithNumLevelZeroTables(2).
		WithNumLevelZeroTablesStall(4).
		WithBlockCacheSize(8 << 20).
		WithIndexCacheSize(4 << 20).
		WithValueLogFileSize(16 << 20). // default 1 GiB, mapped twice
		WithNumCompactors(2).           // the minimum Badger accepts
		WithMetricsEnabled(false)
}

// badgerLogger forwards Badger's warnings and errors to slog. INFO and
// DEBUG are dropped: Badger logs a dozen INFO lines on every open.
type badgerLogger struct{ l *slog.Logger }

func (b badgerLogger) Errorf(f string, a ...any) {
	b.l.Error(strings.TrimSpace(fmt.Sprintf(f, a...)))
}

func (b badgerLogger) Warningf(f string, a ...any) {
	b.l.Warn(strings.TrimSpace(fmt.Sprintf(f, a...)))
}

func (badgerLogger) Infof(string, ...any)  {}
func (badgerLogger) Debugf(string, ...any) {}
