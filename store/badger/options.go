package badger

import (
	"fmt"
	"log/slog"
	"strings"

	badger "github.com/dgraph-io/badger/v4"
	boptions "github.com/dgraph-io/badger/v4/options"
)

// sizing is the part of Badger's options that sets its fixed working set:
// the memtable (its WAL on disk and its arena in memory), the level-0 tables
// a flush makes before compaction merges them, and the builders Badger
// keeps pooled for them.
type sizing struct {
	memTable  int64 // also the txn size limit (15%), see pruneChunk
	memtables int   // full memtables that may wait for their flush
	level0    int   // level-0 tables that start a compaction
	table     int64 // the size of a table below level 0
	// threshold: a record this big or bigger goes to the value log,
	// whose old copies only a reclaim gives back (reclaim.go); a smaller
	// one stays in the LSM tree, where compaction drops a rewritten
	// record's old copy. Badger wants it <= 15% of memTable.
	threshold int64
	// block: the size of a table's block. A table builder takes this much
	// for each block and doubles it for an entry that does not fit (then
	// again for the block's offsets), and Badger keeps up to 8 builders'
	// buffers pooled: with 4 KiB blocks a flipping task's 12.5 KB record
	// took a flush's builder to 15 MiB (BenchmarkFlippingTask, heap
	// profile). 16 KiB blocks hold such a record whole: the heap's warm-up
	// 3.3 MB against 7.5. 64 KiB blocks failed
	// TestRewritesOfLargeRecordsStayBounded in 2 of 5 runs on a loaded
	// machine (9 MiB on disk for 1 MiB of records); 16 KiB passed 3 of 3.
	block int
}

// small is sized for a CLI tool and a store of a few MB (issue 20): at 8
// MiB memtables, ten tasks with 100 KB of arguments rewritten by polls took
// 30 MiB on disk for 1 MiB of records, and a flipping task 63 MB of heap,
// most of it Badger's pooled table builders. A bigger store only flushes
// and compacts more often (store/bench_test.go, BenchmarkCreate).
var small = sizing{memTable: 1 << 20, memtables: 1, level0: 1, table: 512 << 10, threshold: 128 << 10, block: 16 << 10}

// sized is small, or what a WAL left by an earlier, bigger sizing needs.
// The benchmarks set it to compare with that sizing.
var sized = small

// compression is Badger's default, Snappy. Its cost on reads is measured
// against none by BenchmarkReadCompression (readcost_bench_test.go): a read
// whose block is not in the block cache decompresses it into the Go heap,
// and the cache keeps that copy.
var compression = boptions.Snappy

// bloomFalsePositive 0: tables carry no bloom filters. Badger checksums a
// table's whole index, filters included, each time it opens the table, and
// the first touch of those mapped pages is most of what opening a large
// store costs: at 10,000,000 records the filters were 35 MB of the 68 MB
// of index. A filter only spares a point lookup one block read per level
// whose table's key range holds the key (BenchmarkGetWithoutBloom); Get
// answers a polled record from memory (recent.go), and scans and index
// walks never consult filters. The benchmarks set it to compare.
var bloomFalsePositive = 0.0

// compactL0At is how many level-0 tables the MANIFEST lists before Open
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
		WithLogger(l).         // never the default, which writes to stderr under the TUI
		WithSyncWrites(false). // the store syncs each commit itself, see walsync.go
		WithMemTableSize(sized.memTable).
		WithValueThreshold(sized.threshold).
		WithNumMemtables(sized.memtables).
		WithNumLevelZeroTables(sized.level0).
		WithNumLevelZeroTablesStall(sized.level0 + 2).
		WithBaseTableSize(sized.table).
		WithCompression(compression).
		WithBlockCacheSize(8 << 20).
		WithBlockSize(sized.block).
		WithIndexCacheSize(4 << 20).
		WithBloomFalsePositive(bloomFalsePositive).
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
